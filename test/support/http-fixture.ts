/**
 * Shared fixture of the http-*.e2e tests: a started facade with the Todo
 * domain, store permissions and the system-event producer; a test-only
 * credential resolver with an administrator and an ordinary user; and a real
 * node:http server on 127.0.0.1:0, serving the handler by either of
 * toNodeListener's two paths.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type Authorizer,
  type Facade,
  type FacadeOptions,
  MnemeError,
  type RequestContext,
  createFacade,
  registerStorePermissions,
} from "mneme";
import {
  type CredentialResolver,
  type HttpHandler,
  type HttpHandlerOptions,
  type NodeListener,
  createHttpHandler,
  toNodeListener,
} from "mneme/http";
import { registerTodo } from "../../examples/todo/todo-domain.js";

export const TENANT_SYS = "0190f5e4-0000-7000-8000-00000000d000";
export const TENANT_A = "0190f5e4-0000-7000-8000-00000000d001";

export interface TestUser {
  token: string;
  identityUuid: string;
  reqCtx: RequestContext;
  headers: Record<string, string>;
}

function user(name: string, n: number, tenant: string): TestUser {
  const sessionUuid = `0190f5e4-0000-7000-8000-0000000000b${n}`;
  const reqCtx: RequestContext = {
    senderAccountUuid: `0190f5e4-0000-7000-8000-0000000000a${n}`,
    senderSessionUuid: sessionUuid,
    senderIdentityUuid: `0190f5e4-0000-7000-8000-0000000000c${n}`,
    senderTenantUuid: tenant,
  };
  const token = `${sessionUuid}.${name}-key`;
  return {
    token,
    identityUuid: reqCtx.senderIdentityUuid!,
    reqCtx,
    headers: { authorization: `Bearer ${token}`, "x-identity-uuid": reqCtx.senderIdentityUuid! },
  };
}

export const ADMIN = user("admin", 1, TENANT_SYS);
export const USER = user("user", 2, TENANT_A);

/** Knows ADMIN and USER; the identity must match when given, and without one the context has no identity/tenant. */
export const testResolver: CredentialResolver = async (_facade, creds) => {
  for (const u of [ADMIN, USER]) {
    if (`${creds.sessionUuid}.${creds.sessionKey}` !== u.token) continue;
    if (creds.identityUuid === undefined)
      return { senderAccountUuid: u.reqCtx.senderAccountUuid!, senderSessionUuid: u.reqCtx.senderSessionUuid! };
    return creds.identityUuid === u.identityUuid ? { ...u.reqCtx } : undefined;
  }
  return undefined;
};

/** The administrator may everything; everyone else only what passes the Authorized level. */
export const testAuthorizer: Authorizer = (reqCtx, permission) => {
  if (reqCtx.senderAccountUuid === ADMIN.reqCtx.senderAccountUuid) return undefined;
  if (permission.level === "Authorized") return undefined;
  return new MnemeError("PERMISSION_DENIED", `${reqCtx.senderAccountUuid ?? "anonymous"} may not ${permission.domain}.${permission.type}`);
};

/** A started facade with Todo, store permissions and the producer. */
export async function startFacade(opts: FacadeOptions = {}): Promise<Facade> {
  const facade = createFacade({ appName: "http-test", version: "1.2.3", systemEvents: true, authorizer: testAuthorizer, ...opts });
  registerTodo(facade);
  registerStorePermissions(facade);
  await facade.start();
  return facade;
}

export interface TestServer {
  url: string;
  handler: HttpHandler;
  server: Server;
  close(): Promise<void>;
}

/**
 * How toNodeListener serves a handler: "direct" straight from node:http (a
 * handler made by createHttpHandler), "fetch" through a Request and a Response
 * (any other handler; here createHttpHandler's behind a wrapper). The e2e tests
 * run on both: they must behave the same.
 */
export const HTTP_PATHS = ["direct", "fetch"] as const;
export type HttpPath = (typeof HTTP_PATHS)[number];

/** toNodeListener(handler) on the given path. */
export function nodeListenerFor(handler: HttpHandler, path: HttpPath): NodeListener {
  return toNodeListener(path === "direct" ? handler : (request) => handler(request));
}

/** Serves the handler over node:http on 127.0.0.1 with a free port. */
export async function serve(facade: Facade, options: HttpHandlerOptions = {}, path: HttpPath = "direct"): Promise<TestServer> {
  const handler = createHttpHandler(facade, { resolveCredentials: testResolver, ...options });
  const nodeListener = nodeListenerFor(handler, path);
  const server = createServer((req, res) => void nodeListener(req, res));
  return { ...(await listenLocal(server)), handler, server };
}

/** Listens on 127.0.0.1 with a free port; close() also ends open connections (streams). */
export async function listenLocal(server: Server): Promise<{ url: string; close(): Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** JSON request helper: returns status, headers and the parsed body (or the text when not JSON). */
export async function call(
  base: string,
  method: string,
  path: string,
  opts: { headers?: Record<string, string>; body?: unknown; rawBody?: string } = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const headers: Record<string, string> = { ...opts.headers };
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await fetch(`${base}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await res.text();
  let parsed: unknown = text;
  const type = res.headers.get("content-type") ?? "";
  if (type.includes("json") && text !== "") parsed = JSON.parse(text);
  return { status: res.status, headers: res.headers, body: parsed };
}
