import type { ApiViewerOptions } from "./api-viewer.js";
import type { HealthOptions } from "../app/health.js";
import type { CredentialResolver } from "./credentials.js";
import type { ResolvedOpenApiOptions } from "./openapi-types.js";

/** SSE limits and timing. */
export interface SseOptions {
  /** Open streams at once, over every tenant; then 503 SSE_CONNECTION_LIMIT. Default 100. */
  readonly maxConnections?: number;
  /** A comment line every this many ms keeps proxies from closing an idle stream. Default 15000. */
  readonly heartbeatMs?: number;
  /** Events queued for a client that does not read; past it the stream is closed (the client resumes). Default 1000. */
  readonly maxQueuedEvents?: number;
  /** The `retry:` hint (ms) sent first, how long an EventSource waits before reconnecting. Default 2000. */
  readonly retryMs?: number;
}

/** Per-session rate limit of the store endpoints: a token bucket. */
export interface RateLimitOptions {
  /** Requests allowed in a burst, refilled evenly over `windowMs`. Default 120. */
  readonly requests: number;
  /** Default 60000. */
  readonly windowMs: number;
}

/** Cookies set by `POST /api/sessions` and cleared by `DELETE /api/sessions/current`. */
export interface SessionCookieOptions {
  /** Default true: the `Secure` attribute (browsers then send the cookie over HTTPS only). */
  readonly secure?: boolean;
  /** Default "Lax". */
  readonly sameSite?: "Strict" | "Lax" | "None";
  /** Default "/". */
  readonly path?: string;
  /** Max-Age in seconds; default: a session cookie. */
  readonly maxAgeSeconds?: number;
}

/** The options with every default filled in and checked. */
export interface ResolvedHttpOptions {
  readonly resolveCredentials: CredentialResolver;
  readonly basePath: string;
  readonly maxBodyBytes: number;
  readonly maxJsonDepth: number;
  readonly defaultPageSize: number;
  readonly maxPageSize: number;
  readonly sse: Required<SseOptions>;
  readonly storeRateLimit: RateLimitOptions | false;
  readonly sessionCookies: (Required<Omit<SessionCookieOptions, "maxAgeSeconds">> & { maxAgeSeconds?: number }) | false;
  readonly problemTypeBase: string;
  readonly onError: ((error: unknown, request: Request) => void) | undefined;
  readonly now: () => number;
  /** Normalised origins (`URL.origin`). */
  readonly allowedOrigins: ReadonlySet<string>;
  readonly health: Required<HealthOptions> | false;
  readonly dashboard: boolean;
  /** Swagger UI at `/api/docs/`, and where its files are; false when not served. */
  readonly apiViewer: ApiViewerOptions | false;
  /** `GET /api/openapi.json`: who may read it, or false when it is not served. */
  readonly openapi: ResolvedOpenApiOptions | false;
}
