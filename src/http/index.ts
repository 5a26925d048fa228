// mneme/http: the HTTP adapter on the Fetch API, name by name.
export { createHttpHandler, type HttpHandler } from "./handler.js";
export {
  HTTP_DEFAULTS,
  type HttpHandlerOptions,
  type CredentialResolver,
  type SseOptions,
  type RateLimitOptions,
  type SessionCookieOptions,
} from "./options.js";
export type { Credentials } from "./credentials.js";
export { STATUS_BY_CODE, statusOf, type ProblemBody } from "./problem.js";
export type { ListBody } from "./responses.js";
export { formatSseEvent, formatSseGap } from "./sse.js";
export { toNodeListener, type NodeListener, type NodeListenerOptions } from "./node-listener.js";
export {
  checkLiveness,
  checkReadiness,
  HEALTH_DEFAULTS,
  type HealthCheck,
  type HealthOptions,
  type HealthReport,
  type HealthStatus,
  type HealthSubject,
} from "../app/health.js";
