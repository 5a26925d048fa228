/**
 * The fixed parts of the OpenAPI document (openapi.ts): the security schemes
 * of the credentials mneme/http reads, the problem document, a command's
 * answer, and the parameters the command routes take.
 */
import type { JsonSchema } from "../model/types.js";
import type { OpenApiParameter } from "./openapi-types.js";

/** The JSON Schema dialect of every schema in the document. */
export const DIALECT = "https://json-schema.org/draft/2020-12/schema";
/** The security schemes: the credentials readCredentials accepts (credentials.ts). */
export const SCHEMES = {
  sessionToken: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "<sessionUuid>.<sessionKey>",
    description: "The `token` of a login (`Authorization: Bearer <sessionUuid>.<sessionKey>`).",
  },
  identityHeader: {
    type: "apiKey",
    in: "header",
    name: "X-Identity-Uuid",
    description: "The identity (in the path's tenant) the caller acts as; needed by `authorized` and administrator permissions.",
  },
  sessionCookie: {
    type: "apiKey",
    in: "cookie",
    name: "session",
    description:
      "The session token as the `session` cookie (set by login with `sessionCookies`). A state-changing request authenticated by the cookie alone needs an allowed `Origin` (else 403 CSRF).",
  },
  identityCookie: { type: "apiKey", in: "cookie", name: "identity", description: "The identity as the `identity` cookie." },
} as const;
/** A session: the bearer token or the session cookie. */
export const SESSION: Record<string, string[]>[] = [{ sessionToken: [] }, { sessionCookie: [] }];
/** A session and an identity, by header or by cookie. */
export const IDENTITY: Record<string, string[]>[] = [
  { sessionToken: [], identityHeader: [] },
  { sessionCookie: [], identityCookie: [] },
];

/** Statuses of protocol answers that no error code maps to (they carry INVALID_REQUEST). */
export const PROTOCOL: Readonly<Record<number, { codes: readonly string[]; why: string }>> = {
  405: { codes: ["INVALID_REQUEST"], why: "the path exists, the method does not (with `Allow`)" },
  413: { codes: ["PAYLOAD_TOO_LARGE"], why: "the body is larger than maxBodyBytes" },
  415: { codes: ["INVALID_REQUEST"], why: "the body is not JSON by its Content-Type" },
};

/** `components/schemas/Problem`: the body of every error (problem.ts). */
export const PROBLEM: JsonSchema = {
  type: "object",
  description: "An RFC 9457 problem document; `code` is the MnemeError code, `type` the problemTypeBase followed by it.",
  properties: {
    type: { type: "string" },
    title: { type: "string" },
    status: { type: "integer", minimum: 400, maximum: 599 },
    detail: { type: "string" },
    code: { type: "string", pattern: "^[A-Z][A-Z0-9_]*$" },
    errors: {
      type: "array",
      description: "validation failures: one per failing JSON pointer of the payload",
      items: { type: "object", properties: { pointer: { type: "string" }, message: { type: "string" } }, required: ["pointer", "message"] },
    },
  },
  required: ["type", "title", "status", "detail", "code"],
};

/** `components/schemas/CommandResponse`: what the command route answers (routes.ts). */
export const COMMAND_RESPONSE: JsonSchema = {
  type: "object",
  properties: {
    commandUuid: { type: "string", format: "uuid" },
    events: {
      type: "array",
      description: "the events the command appended (none for a command that changed nothing)",
      items: {
        type: "object",
        properties: {
          name: { type: "string" },
          version: { type: "integer" },
          aggregateUuid: { type: "string" },
          payload: {},
        },
        required: ["name"],
      },
    },
    result: { description: "what the command handler returned, when it returned something (never on a replay)" },
    replayed: { const: true, description: "a retry with the same Idempotency-Key: the recorded outcome, nothing ran" },
    handlerErrors: {
      type: "array",
      description: "with `wait=true`: the event handlers that failed on the command's events",
      items: {
        type: "object",
        properties: { eventHandlerName: { type: "string" }, message: { type: "string" } },
        required: ["eventHandlerName", "message"],
      },
    },
  },
  required: ["commandUuid", "events"],
};

/** `components/parameters`: the tenant of the path, and a command's `wait` and headers. */
export const PARAMETERS: Record<string, OpenApiParameter> = {
  tenantUuid: {
    name: "tenantUuid",
    in: "path",
    required: true,
    description: "the tenant the request acts in (the request context's targetTenantUuid)",
    schema: { type: "string", minLength: 1 },
  },
  wait: {
    name: "wait",
    in: "query",
    description: "`true`: answer once the event handlers have applied the command's events (their failures in `handlerErrors`)",
    schema: { type: "string", enum: ["true", "false"] },
  },
  idempotencyKey: {
    name: "Idempotency-Key",
    in: "header",
    description:
      "1 to 255 printable ASCII characters, one per intended command, kept per signed-in account: a retry with the same key replays the recorded outcome (`replayed: true`, header `Idempotent-Replayed: true`) instead of running again; the same key with another command, tenant or body is 409. Needs a signed-in caller (else 400).",
    schema: { type: "string", pattern: "^[\\x20-\\x7e]{1,255}$" },
  },
  targetAggregateUuid: {
    name: "X-Target-Aggregate-Uuid",
    in: "header",
    description: "with X-Target-Aggregate-Version: the aggregate whose version is expected",
    schema: { type: "string" },
  },
  targetAggregateVersion: {
    name: "X-Target-Aggregate-Version",
    in: "header",
    description: "the expected version of the target aggregate (optimistic concurrency: a stale one is 409 CONFLICT)",
    schema: { type: "string", pattern: "^[0-9]+$" },
  },
  traceparent: {
    name: "traceparent",
    in: "header",
    description: "W3C trace context: the command's or query's span continues the caller's trace",
    schema: { type: "string" },
  },
};
