/**
 * The shapes of the OpenAPI 3.1 document mneme/http writes (only the parts it
 * uses), and how a route describes itself in it.
 */
import type { JsonSchema } from "../model/types.js";

/** An OpenAPI 3.1 document: `openapi`, `info`, `paths`, `components`. */
export interface OpenApiDocument {
  readonly openapi: "3.1.0";
  readonly jsonSchemaDialect: string;
  readonly info: { readonly title: string; readonly version: string; readonly description?: string };
  readonly servers?: readonly { readonly url: string; readonly description?: string }[];
  readonly tags: readonly { readonly name: string; readonly description?: string }[];
  readonly paths: Record<string, Record<string, OpenApiOperation>>;
  readonly components: {
    readonly schemas: Record<string, JsonSchema | boolean>;
    readonly responses: Record<string, OpenApiResponse>;
    readonly parameters: Record<string, OpenApiParameter>;
    readonly securitySchemes: Record<string, Record<string, unknown>>;
  };
}

/** One operation (a method of a path). `x-mneme-message` names the command or query it serves, `x-mneme-permission` who may call it. */
export interface OpenApiOperation {
  operationId: string;
  summary?: string;
  description?: string;
  tags: string[];
  parameters?: (OpenApiParameter | { $ref: string })[];
  requestBody?: { required: boolean; description?: string; content: Record<string, { schema: JsonSchema | boolean }> };
  responses: Record<string, OpenApiResponse | { $ref: string }>;
  security: Record<string, string[]>[];
  "x-mneme-message"?: { kind: "command" | "query"; domain: string; name: string };
  "x-mneme-permission": OpenApiPermission;
}

/** What the permission registry says of the message guarding an operation. */
export interface OpenApiPermission {
  /** `level` (with `level`), `custom` (a function decides), `administrator` (only the authorizer grants it), `unknown`. */
  kind: "level" | "custom" | "administrator" | "unknown";
  level?: string;
  /** The message whose permission decides (`Domain.Name`). */
  message: string;
  description?: string;
}

export interface OpenApiParameter {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required?: boolean;
  description?: string;
  schema: JsonSchema;
}

export interface OpenApiResponse {
  description: string;
  headers?: Record<string, { description?: string; schema: JsonSchema }>;
  content?: Record<string, { schema: JsonSchema | boolean }>;
}

/**
 * How a route of a module describes itself in the OpenAPI document
 * (`HttpRoute.openapi`); every field is optional. Without it the operation
 * still has its path, method, path parameters and permission, a JSON body for
 * POST, PUT and PATCH, and a `2XX` answer.
 */
export interface RouteDoc {
  readonly summary?: string;
  readonly description?: string;
  /** The JSON body: a schema, `"payload"` (the guard message's payload schema), or `false` for none. */
  readonly body?: JsonSchema | "payload" | false;
  /** Query parameters by name. */
  readonly query?: Readonly<Record<string, { readonly schema: JsonSchema; readonly description?: string }>>;
  /** Success answers by status (`"200"`, `"201"`, `"204"`): a description and, for a JSON body, its schema. */
  readonly responses?: Readonly<
    Record<string, { readonly description: string; readonly schema?: JsonSchema; readonly contentType?: string }>
  >;
}

/** `info` of the document. */
export interface OpenApiInfo {
  readonly title?: string;
  readonly version?: string;
  readonly description?: string;
}

/** One of the document's `servers`. */
export interface OpenApiServer {
  readonly url: string;
  readonly description?: string;
}

/** createHttpHandler's `openapi` option. */
export interface OpenApiServeOptions {
  /**
   * Who may read the document. `"public"` (the default): anyone, without
   * credentials: it names every command, query and route with its payload
   * schema and permission, never data. `"authenticated"`: a caller with a
   * valid session, else 401 (for an application that tells anonymous callers
   * nothing of what exists).
   */
  readonly access?: "public" | "authenticated";
  /** `info` of the document. Default: the facade's appName and version. */
  readonly info?: OpenApiInfo;
  /** `servers` of the document. Default none (clients use the document's own origin). */
  readonly servers?: readonly OpenApiServer[];
}

/** The `openapi` option checked, with its default. */
export type ResolvedOpenApiOptions = { readonly access: "public" | "authenticated" } & Omit<OpenApiServeOptions, "access">;
