/**
 * The OpenAPI 3.1 document of an application's HTTP surface, made from what
 * is registered: every command and query (the generic routes, one operation
 * each, with its payload's JSON Schema), the Runtime routes and the routes of
 * the modules given, each with its permission as a security requirement and
 * the problem documents it may answer. JSON Schema 2020-12 is OpenAPI 3.1's
 * dialect, so the payload schemas are embedded as they are; their `$defs` are
 * lifted into `components/schemas` under names unique per domain.
 */
import type { Facade } from "../app/facade.js";
import { listErrorCodes, type MnemeErrorCode } from "../model/errors.js";
import type { MessageRef } from "../model/facade-handle.js";
import type { CommandType, QueryType } from "../model/tokens.js";
import type { JsonSchema } from "../model/types.js";
import { parseLocalRef } from "../schema/json-pointer.js";
import { CORE_ROUTE_DOCS, STORE_PARAM } from "./openapi-core-routes.js";
import type {
  OpenApiDocument,
  OpenApiInfo,
  OpenApiServer,
  OpenApiOperation,
  OpenApiParameter,
  OpenApiPermission,
  OpenApiResponse,
  RouteDoc,
} from "./openapi-types.js";
import { RuntimeDomain } from "../runtime/runtime-domain.js";
import { COMMAND_RESPONSE, DIALECT, IDENTITY, PARAMETERS, PROBLEM, PROTOCOL, SCHEMES, SESSION } from "./openapi-components.js";
import { STATUS_BY_CODE } from "./problem.js";
import { fixedGuardOf, type HttpRoute, type HttpRouteModule } from "./route.js";
import { COMMAND_ROUTE, CORE_MODULE, isStoreMessage, QUERY_ROUTE, servedModules } from "./routes.js";

/** The path the handler serves the document at (below basePath). */
export const OPENAPI_PATH = "/api/openapi.json";

/** Options of buildOpenApiDocument; createHttpHandler passes its own. */
export interface OpenApiOptions {
  /** Route modules, as given to createHttpHandler (their routes are documented after the generic ones). */
  readonly modules?: readonly HttpRouteModule[];
  /** The handler's basePath (every path is prefixed with it). Default "". */
  readonly basePath?: string;
  /** `info` of the document. Default: the facade's appName and version. */
  readonly info?: OpenApiInfo;
  /** `servers` of the document, e.g. `[{ url: "https://todo.example" }]`. Default none (the document's own origin). */
  readonly servers?: readonly OpenApiServer[];
  /** The handler serves the document at `GET <basePath>/api/openapi.json` to this audience (documented as an operation). Default false. */
  readonly served?: "public" | "authenticated" | false;
}

/**
 * The OpenAPI 3.1 document of a facade served by createHttpHandler with these
 * options. It lists every registered command and query and every route,
 * whoever asks: the permissions say who may call them.
 * @example
 * const doc = buildOpenApiDocument(facade, { modules: [accountRoutes()] });
 * writeFileSync("openapi.json", JSON.stringify(doc, null, 2));
 */
export function buildOpenApiDocument(facade: Facade, options: OpenApiOptions = {}): OpenApiDocument {
  return new DocumentBuilder(facade, options).build();
}

class DocumentBuilder {
  readonly #facade: Facade;
  readonly #options: OpenApiOptions;
  readonly #basePath: string;
  readonly #schemas: Record<string, JsonSchema | boolean> = {};
  readonly #paths: Record<string, Record<string, OpenApiOperation>> = {};
  readonly #statuses = new Set<number>();
  readonly #tags = new Map<string, string | undefined>();
  readonly #userStatuses: readonly number[];

  constructor(facade: Facade, options: OpenApiOptions) {
    this.#facade = facade;
    this.#options = options;
    this.#basePath = options.basePath ?? "";
    // A handler may throw any code defined with defineErrorCode: its status is one a message route answers.
    this.#userStatuses = [...new Set(listErrorCodes().map((c) => c.status))];
  }

  build(): OpenApiDocument {
    const modules = servedModules(this.#options.modules);
    for (const m of modules) {
      for (const route of m.routes) {
        if (m.name === CORE_MODULE && route.path === COMMAND_ROUTE) this.#messages("command");
        else if (m.name === CORE_MODULE && route.path === QUERY_ROUTE) this.#messages("query");
        else this.#route(m, route);
      }
    }
    const served = this.#options.served ?? false;
    if (served !== false) this.#openApiRoute(served);
    const f = this.#facade;
    const info = this.#options.info ?? {};
    return {
      openapi: "3.1.0",
      jsonSchemaDialect: DIALECT,
      info: {
        title: info.title ?? f.appName,
        version: info.version ?? f.version,
        ...(info.description === undefined ? {} : { description: info.description }),
      },
      ...(this.#options.servers === undefined ? {} : { servers: this.#options.servers.map((s) => ({ ...s })) }),
      tags: [...this.#tags].map(([name, description]) =>
        description === undefined || description === "" ? { name } : { name, description },
      ),
      paths: this.#paths,
      components: {
        schemas: { Problem: PROBLEM, CommandResponse: COMMAND_RESPONSE, ...this.#schemas },
        responses: this.#problemResponses(),
        parameters: PARAMETERS,
        securitySchemes: SCHEMES,
      },
    };
  }

  /** One operation per registered command (or query) of every domain, on the generic route. */
  #messages(kind: "command" | "query"): void {
    for (const d of this.#facade.domains.values()) {
      const types: Iterable<CommandType<any, any> | QueryType<any, any>> = kind === "command" ? d.commands.values() : d.queries.values();
      for (const t of types) {
        this.#tags.set(d.name, d.description);
        const path = `${this.#basePath}/api/tenants/{tenantUuid}/${kind === "command" ? "commands" : "queries"}/${segment(d.name)}/${segment(t.name)}`;
        const payload = this.#payloadSchema(t);
        const result = this.#resultSchema(t);
        const parameters: { $ref: string }[] = [{ $ref: "#/components/parameters/tenantUuid" }];
        if (kind === "command")
          for (const p of ["wait", "idempotencyKey", "targetAggregateUuid", "targetAggregateVersion"])
            parameters.push({ $ref: `#/components/parameters/${p}` });
        parameters.push({ $ref: "#/components/parameters/traceparent" });
        const success: OpenApiResponse =
          kind === "command"
            ? {
                description: "the command ran (or, with Idempotency-Key, was replayed)",
                headers: { "Idempotent-Replayed": { description: "`true` on a replay", schema: { type: "string", enum: ["true"] } } },
                content: { "application/json": { schema: commandResponse(result) } },
              }
            : {
                description: "the query handler's result (`null` when it returns nothing)",
                content: { "application/json": { schema: result ?? {} } },
              };
        const permission = this.#permission(t);
        const operation: OpenApiOperation = {
          operationId: `${kind}.${d.name}.${t.name}`,
          ...(t.description === "" ? {} : { summary: t.description }),
          description: permissionText(permission),
          tags: [d.name],
          parameters,
          requestBody: {
            required: false,
            description: "the payload (an empty body counts as `{}`)",
            content: { "application/json": { schema: payload } },
          },
          responses: { "200": success, ...this.#problems({ body: true, messages: true, store: isStoreMessage(t), permission }) },
          security: securityOf(permission, isStoreMessage(t)),
          "x-mneme-message": { kind, domain: d.name, name: t.name },
          "x-mneme-permission": permission,
        };
        this.#add(path, "post", operation);
      }
    }
  }

  /** A route of the core or of a module: its path, method, parameters and guard's permission, with its doc where there is one. */
  #route(m: HttpRouteModule, route: HttpRoute): void {
    const doc: RouteDoc = route.openapi ?? (m.name === CORE_MODULE ? CORE_ROUTE_DOCS[`${route.method} ${route.path}`] : undefined) ?? {};
    const guard = fixedGuardOf(route.guard);
    // The generic routes other than the messages are the Runtime's: tagged with its domain.
    const tag = m.name === CORE_MODULE ? RuntimeDomain.name : m.name;
    this.#tags.set(tag, m.name === CORE_MODULE ? "The Runtime: introspection, control, stores and system events" : undefined);
    const path = `${this.#basePath}${route.path.replace(/:([A-Za-z0-9_]+)/g, "{$1}")}`;
    const parameters: (OpenApiParameter | { $ref: string })[] = [];
    for (const [, name] of route.path.matchAll(/:([A-Za-z0-9_]+)/g)) {
      if (name === "tenantUuid") parameters.push({ $ref: "#/components/parameters/tenantUuid" });
      else
        parameters.push({
          name: name!,
          in: "path",
          required: true,
          schema: name === "store" ? STORE_PARAM : { type: "string", minLength: 1 },
        });
    }
    for (const [name, q] of Object.entries(doc.query ?? {})) {
      parameters.push({ name, in: "query", schema: q.schema, ...(q.description === undefined ? {} : { description: q.description }) });
    }
    const store = guard !== undefined && isStoreMessage(guard);
    const permission = guard === undefined ? undefined : this.#permission(guard);
    const needsSession = route.session === true || store;
    const hasBody = doc.body === undefined ? route.method !== "GET" && route.method !== "DELETE" : doc.body !== false;
    const operation: OpenApiOperation = {
      operationId: `${route.method} ${path}`,
      ...(doc.summary === undefined ? {} : { summary: doc.summary }),
      description: [doc.description, permission === undefined ? "The route's code decides who may call it." : permissionText(permission)]
        .filter((s) => s !== undefined)
        .join("\n\n"),
      tags: [tag],
      ...(parameters.length === 0 ? {} : { parameters }),
      ...(hasBody ? { requestBody: this.#routeBody(doc, guard) } : {}),
      responses: { ...this.#successes(doc), ...this.#problems({ body: hasBody, messages: true, store, permission }) },
      security: permission === undefined ? optionalCredentials() : securityOf(permission, needsSession),
      "x-mneme-permission": permission ?? { kind: "unknown", message: "" },
    };
    this.#add(path, route.method.toLowerCase(), operation);
  }

  /** `GET /api/openapi.json` itself. */
  #openApiRoute(access: "public" | "authenticated"): void {
    this.#tags.set("OpenAPI", "This document");
    this.#add(`${this.#basePath}${OPENAPI_PATH}`, "get", {
      operationId: "openapi",
      summary: "This OpenAPI 3.1 document",
      description:
        access === "public"
          ? "Served without credentials (createHttpHandler's `openapi` option can ask for a session or turn it off)."
          : 'Served to a caller with a valid session (createHttpHandler\'s `openapi: { access: "authenticated" }`).',
      tags: ["OpenAPI"],
      responses: {
        "200": { description: "the OpenAPI 3.1 document", content: { "application/json": { schema: { type: "object" } } } },
        ...this.#problems({ body: false, messages: false, store: false, permission: undefined }),
      },
      security: access === "public" ? [] : SESSION,
      "x-mneme-permission": { kind: "level", level: access === "public" ? "Anonymous" : "Authenticated", message: "" },
    });
  }

  #routeBody(doc: RouteDoc, guard: MessageRef | undefined): NonNullable<OpenApiOperation["requestBody"]> {
    let schema: JsonSchema | boolean = {};
    if (doc.body === "payload") {
      const t = guard === undefined ? undefined : this.#token(guard);
      if (t !== undefined) schema = this.#payloadSchema(t);
    } else if (doc.body !== undefined && doc.body !== false) schema = doc.body;
    return { required: false, description: "JSON (an empty body counts as `{}`)", content: { "application/json": { schema } } };
  }

  #successes(doc: RouteDoc): Record<string, OpenApiResponse> {
    if (doc.responses === undefined) return { "2XX": { description: "success" } };
    const out: Record<string, OpenApiResponse> = {};
    for (const [status, r] of Object.entries(doc.responses)) {
      out[status] =
        r.schema === undefined
          ? { description: r.description }
          : { description: r.description, content: { [r.contentType ?? "application/json"]: { schema: r.schema } } };
    }
    return out;
  }

  /** The problem answers an operation may give, as references to components/responses. */
  #problems(o: {
    body: boolean;
    messages: boolean;
    store: boolean;
    permission: OpenApiPermission | undefined;
  }): Record<string, { $ref: string }> {
    const statuses = [400, 401, 403, 404, 409, 500, 503];
    if (o.body) statuses.push(413, 415);
    if (o.store) statuses.push(429);
    if (o.messages) statuses.push(...this.#userStatuses);
    const out: Record<string, { $ref: string }> = {};
    for (const s of [...new Set(statuses)].sort((a, b) => a - b)) {
      this.#statuses.add(s);
      out[String(s)] = { $ref: `#/components/responses/Problem${s}` };
    }
    return out;
  }

  /** components/responses: one problem response per status used, naming the codes that answer with it. */
  #problemResponses(): Record<string, OpenApiResponse> {
    const byStatus = new Map<number, Set<string>>();
    const add = (status: number, code: string) => {
      let codes = byStatus.get(status);
      if (codes === undefined) byStatus.set(status, (codes = new Set()));
      codes.add(code);
    };
    for (const [code, status] of Object.entries(STATUS_BY_CODE) as [MnemeErrorCode, number][]) add(status, code);
    for (const c of listErrorCodes()) add(c.status, c.code);
    for (const [status, p] of Object.entries(PROTOCOL)) for (const c of p.codes) add(Number(status), c);
    // Protocol answers: an unknown path is 404 NOT_FOUND; a malformed body or path is 400 INVALID_REQUEST.
    add(404, "NOT_FOUND");
    const out: Record<string, OpenApiResponse> = {};
    for (const status of [...this.#statuses].sort((a, b) => a - b)) {
      const codes = [...(byStatus.get(status) ?? [])].sort();
      const protocol = PROTOCOL[status];
      const description = `${protocol?.why ?? "a problem"}: ${codes.length === 0 ? "a code defined by the application" : codes.join(", ")}`;
      const schema: JsonSchema = {
        allOf: [
          { $ref: "#/components/schemas/Problem" },
          { properties: { status: { const: status }, ...(codes.length === 0 ? {} : { code: { enum: codes } }) } },
        ],
      };
      out[`Problem${status}`] = {
        description,
        ...(status === 401 ? { headers: { "WWW-Authenticate": { schema: { type: "string" } } } } : {}),
        ...(status === 429 || status === 503 ? { headers: { "Retry-After": { schema: { type: "string" } } } } : {}),
        content: { "application/problem+json": { schema } },
      };
    }
    return out;
  }

  #token(ref: MessageRef): CommandType<any, any> | QueryType<any, any> | undefined {
    const d = this.#facade.domains.get(ref.domain);
    return d?.commands.get(ref.name) ?? d?.queries.get(ref.name);
  }

  /**
   * A message's payload schema as a reference to components/schemas
   * (`Domain.Name`), its `$defs` lifted next to it; `{}` (any JSON) when it has none.
   */
  #payloadSchema(t: CommandType<any, any> | QueryType<any, any>): JsonSchema {
    const doc = this.#facade.schemas.documentFor(t);
    if (doc === undefined) return { description: `${t.domain}.${t.name} has no JSON Schema: any JSON object` };
    return this.#component(t.domain, componentName(t.name), doc);
  }

  /** A message's result schema (`resultSchema`) as a reference to `<Domain>.<Name>.Result`; undefined when it has none. */
  #resultSchema(t: CommandType<any, any> | QueryType<any, any>): JsonSchema | undefined {
    return t.resultSchema === undefined ? undefined : this.#component(t.domain, `${componentName(t.name)}.Result`, t.resultSchema);
  }

  /** A schema document placed in components/schemas as `<domain>.<name>`, its `$defs` lifted as `<domain>.<def>`. */
  #component(domain: string, name: string, doc: JsonSchema): JsonSchema {
    const { $defs, $schema: _dialect, ...root } = doc as JsonSchema & { $defs?: Record<string, JsonSchema | boolean> };
    const defs = Object.entries($defs ?? {});
    const names = new Map(defs.map(([def]) => [def, `${domain}.${componentName(def)}`]));
    // A name another message's schema holds with other content gets a suffix; renaming may change what refers to it: again.
    for (let round = 0; round <= defs.length; round++) {
      let renamed = false;
      for (const [def, schema] of defs) {
        if (this.#clashes(names.get(def)!, rewriteRefs(schema, names))) {
          names.set(def, this.#free(`${domain}.${componentName(def)}`, names));
          renamed = true;
        }
      }
      if (!renamed) break;
    }
    for (const [def, schema] of defs) this.#schemas[names.get(def)!] ??= rewriteRefs(schema, names) as JsonSchema;
    const rewritten = rewriteRefs(root, names) as JsonSchema;
    const wanted = `${domain}.${name}`;
    const placed = this.#clashes(wanted, rewritten) ? this.#free(wanted, names) : wanted;
    this.#schemas[placed] ??= rewritten;
    return { $ref: `#/components/schemas/${placed}` };
  }

  /** True when components/schemas holds `name` with another schema. */
  #clashes(name: string, schema: unknown): boolean {
    const held = this.#schemas[name];
    return held !== undefined && JSON.stringify(held) !== JSON.stringify(schema);
  }

  /** `wanted_2`, `wanted_3`, ...: the first that neither components/schemas nor `taken` holds. */
  #free(wanted: string, taken: ReadonlyMap<string, string>): string {
    const used = new Set(taken.values());
    for (let i = 2; ; i++) {
      const name = `${wanted}_${i}`;
      if (this.#schemas[name] === undefined && !used.has(name)) return name;
    }
  }

  #permission(ref: MessageRef): OpenApiPermission {
    const message = `${ref.domain}.${ref.name}`;
    const p = this.#facade.permissions.get(ref.domain, ref.name);
    if (p === undefined) return { kind: "unknown", message };
    const description = p.description === "" ? {} : { description: p.description };
    if (p.kind === "level") return { kind: "level", level: p.level, message, ...description };
    return { kind: p.kind, message, ...description };
  }

  #add(path: string, method: string, operation: OpenApiOperation): void {
    const item = (this.#paths[path] ??= {});
    // A route defined twice is refused by buildRoutes; the first one is the one served.
    item[method] ??= operation;
  }
}

/** A command's answer: CommandResponse, its `result` typed when the command declares a resultSchema. */
function commandResponse(result: JsonSchema | undefined): JsonSchema {
  const base = { $ref: "#/components/schemas/CommandResponse" };
  return result === undefined ? base : { allOf: [base, { properties: { result } }] };
}

/** A path segment as it appears in a path template (percent-encoded where needed). */
function segment(s: string): string {
  return encodeURIComponent(s);
}

/** A components/schemas key: only the characters OpenAPI allows (`^[a-zA-Z0-9._-]+$`). */
function componentName(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]/g, "_");
}

/** `#/$defs/X` references rewritten to the lifted `#/components/schemas/<Domain>.X`. Data keywords are left as they are. */
function rewriteRefs(schema: unknown, names: ReadonlyMap<string, string>): unknown {
  if (Array.isArray(schema)) return schema.map((s) => rewriteRefs(s, names));
  if (typeof schema !== "object" || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === "$ref" && typeof v === "string") {
      const path = parseLocalRef(v);
      const def = path !== undefined && path.length >= 2 && path[0] === "$defs" ? names.get(path[1]!) : undefined;
      out[k] = def === undefined ? v : `#/components/schemas/${[def, ...path!.slice(2)].map(escapePointer).join("/")}`;
    } else if (k === "enum" || k === "const" || k === "default" || k === "examples") out[k] = v;
    else out[k] = rewriteRefs(v, names);
  }
  return out;
}

function escapePointer(s: string): string {
  return encodeURIComponent(s.replace(/~/g, "~0").replace(/\//g, "~1")).replace(/%7E/gi, "~");
}

/** The security requirement of a permission: none for anonymous, a session (and an identity) otherwise. */
function securityOf(p: OpenApiPermission, needsSession: boolean): Record<string, string[]>[] {
  if (p.kind === "level" && p.level === "Anonymous") return needsSession ? SESSION : [];
  // An identity is optional there: a session alone satisfies it.
  if (p.kind === "level" && p.level === "Authenticated") return SESSION;
  if (p.kind === "custom") return needsSession ? [...SESSION, ...IDENTITY] : optionalCredentials();
  return IDENTITY;
}

/** Credentials optional: the route's code (or a custom permission function) decides. */
function optionalCredentials(): Record<string, string[]>[] {
  return [{}, ...SESSION, ...IDENTITY];
}

function permissionText(p: OpenApiPermission): string {
  switch (p.kind) {
    case "level":
      return `Permission ${p.message}: ${p.level}${p.level === "Anonymous" ? " (no credentials needed)" : ""}.`;
    case "custom":
      return `Permission ${p.message}: a custom function decides${p.description === undefined ? "" : ` (${p.description})`}; a denial of a caller without a session is 401.`;
    case "administrator":
      return `Permission ${p.message}: administrators (only the authorizer grants it).`;
    default:
      return `No permission is registered for ${p.message}: every call is denied.`;
  }
}
