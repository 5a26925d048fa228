/**
 * `mneme/http`: the HTTP adapter on the Fetch API: createHttpHandler with its
 * generic command, query, Runtime and system-event routes, route modules for
 * the rest (the built-in domains' come from mneme/defaults), toNodeListener,
 * and the health checks it serves.
 */
export { createHttpHandler, type HttpHandler } from "./handler.js";
export { HTTP_DEFAULTS, type HttpHandlerOptions } from "./options.js";
export type { SseOptions, RateLimitOptions, SessionCookieOptions } from "./settings.js";
export type { Credentials, CredentialResolver } from "./credentials.js";
export type { HttpRouteModule, HttpRoute, RouteContext } from "./route.js";
export type { Reply } from "./exchange.js";
export { API_VIEWER_PATH, type ApiViewerOptions } from "./api-viewer.js";
export { buildOpenApiDocument, OPENAPI_PATH, type OpenApiOptions } from "./openapi.js";
export type {
  OpenApiDocument,
  OpenApiInfo,
  OpenApiOperation,
  OpenApiPermission,
  OpenApiServeOptions,
  OpenApiServer,
  RouteDoc,
} from "./openapi-types.js";
export { STATUS_BY_CODE, statusOf, type ProblemBody } from "./problem.js";
export { jsonResponse, noContent, type ListBody } from "./responses.js";
export { formatSseEvent, formatSseGap } from "./sse.js";
export { allowEventSubscriptions, subscriptionPermissionType, SUBSCRIPTION_RECHECK_MS } from "./event-stream.js";
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
