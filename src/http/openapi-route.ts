/**
 * `GET <basePath>/api/openapi.json`: the OpenAPI 3.1 document of the handler's
 * routes (openapi.ts), served to anyone by default, to a signed-in caller
 * with `access: "authenticated"`, or not at all with `openapi: false`.
 */
import type { Facade } from "../app/facade.js";
import { listErrorCodes, MnemeError } from "../model/errors.js";
import { readCredentials } from "./credentials.js";
import type { InboundRequest, Reply } from "./exchange.js";
import { buildOpenApiDocument } from "./openapi.js";
import type { OpenApiServeOptions, ResolvedOpenApiOptions } from "./openapi-types.js";
import type { HttpRouteModule } from "./route.js";
import type { ResolvedHttpOptions } from "./settings.js";

/** `openapi` of createHttpHandler: true or undefined is `{ access: "public" }`; INVALID_REQUEST for anything that is not an option. */
export function resolveOpenApiOptions(option: boolean | OpenApiServeOptions | undefined): ResolvedOpenApiOptions | false {
  if (option === false) return false;
  if (option === undefined || option === true) return { access: "public" };
  if (typeof option !== "object" || option === null)
    throw new MnemeError("INVALID_REQUEST", 'openapi must be true, false or { access: "public" | "authenticated", info?, servers? }');
  const access = option.access ?? "public";
  if (access !== "public" && access !== "authenticated")
    throw new MnemeError("INVALID_REQUEST", `openapi.access must be "public" or "authenticated" (got ${JSON.stringify(access)})`);
  if (option.servers !== undefined && (!Array.isArray(option.servers) || !option.servers.every((s) => typeof s?.url === "string")))
    throw new MnemeError("INVALID_REQUEST", "openapi.servers must be an array of { url, description? }");
  const info: unknown = option.info;
  if (
    info !== undefined &&
    (typeof info !== "object" ||
      info === null ||
      !["title", "version", "description"].every((k) => {
        const v = (info as Record<string, unknown>)[k];
        return v === undefined || typeof v === "string";
      }))
  )
    throw new MnemeError("INVALID_REQUEST", "openapi.info must be { title?, version?, description? }, each a string");
  return { ...option, access };
}

/**
 * The endpoint: builds the document on request and keeps it while nothing
 * it depends on changed (domains, permissions and error codes can be added
 * after the handler is made; none is ever removed).
 */
export class OpenApiEndpoint {
  #cached: { key: string; body: string } | undefined;

  constructor(
    private readonly facade: Facade,
    private readonly options: ResolvedHttpOptions & { readonly modules: readonly HttpRouteModule[] },
    private readonly serve: ResolvedOpenApiOptions,
  ) {}

  /** 200 with the document, 401 without a valid session when access is "authenticated"; undefined for a method it does not serve. */
  async answer(request: InboundRequest, unauthenticated: (reason?: string) => Reply): Promise<Reply> {
    if (this.serve.access === "authenticated") {
      const creds = readCredentials(request.headers);
      if (creds === undefined || typeof creds === "string") return unauthenticated(creds);
      const resolved = await this.options.resolveCredentials(this.facade, creds);
      if (resolved === undefined)
        return unauthenticated("the session is unknown, expired or signed out, or the identity is not the account's");
    }
    return {
      status: 200,
      headers: { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" },
      body: this.#body(),
    };
  }

  #body(): string {
    const f = this.facade;
    const key = `${f.domains.size}:${f.permissions.list().length}:${listErrorCodes().length}`;
    if (this.#cached?.key === key) return this.#cached.body;
    const doc = buildOpenApiDocument(f, {
      modules: this.options.modules,
      basePath: this.options.basePath,
      served: this.serve.access,
      ...(this.serve.info === undefined ? {} : { info: this.serve.info }),
      ...(this.serve.servers === undefined ? {} : { servers: this.serve.servers }),
    });
    const body = JSON.stringify(doc);
    this.#cached = { key, body };
    return body;
  }
}
