/**
 * The HTTP routes of the built-in Account domain, as a route module for
 * mneme/http: `createHttpHandler(facade, { modules: [accountRoutes()] })`
 * serves registration, account reads, login and logout, and resolves the
 * sessions these logins start. The HTTP core itself knows no domain.
 */
import { isMnemeError, MnemeError } from "../model/errors.js";
import { serializeCookie } from "../http/credentials.js";
import type { CredentialResolver } from "../http/credentials.js";
import { boolParam, jsonResponse, noContent, readPage } from "../http/responses.js";
import { bodyAs, guardBy, type HttpRoute, type HttpRouteModule, pageQuery } from "../http/route.js";
import { GetAccount, ListAccounts, RegisterAccount } from "./account.js";
import { resolveCredentials } from "./credentials.js";
import { Login, Logout } from "./session.js";

const ACCOUNT_UUID = { type: "object", properties: { accountUuid: { type: "string" } }, required: ["accountUuid"] };
const INCLUDE_HISTORY = { schema: { type: "string", enum: ["true", "false"] }, description: "with the account's events" };
const PAGE_PARAM = { schema: { type: "integer", minimum: 1 } };
const SESSION_BODY = {
  type: "object",
  properties: {
    sessionUuid: { type: "string" },
    sessionKey: { type: "string" },
    token: { type: "string", description: "`Authorization: Bearer <token>`" },
    accountUuid: { type: "string" },
    expiresAt: {},
    identities: {
      type: "array",
      items: {
        type: "object",
        properties: { identityUuid: { type: "string" }, tenantUuid: { type: "string" } },
        required: ["identityUuid", "tenantUuid"],
      },
    },
  },
  required: ["sessionUuid", "sessionKey", "token", "accountUuid", "identities"],
};

/** resolveCredentials of the built-in Account domain; a facade without registerDefaults is a setup mistake (500), not the client's. */
const accountResolver: CredentialResolver = async (facade, creds) => {
  try {
    return await resolveCredentials(facade, creds);
  } catch (e) {
    if (isMnemeError(e, "INVALID_STATE"))
      throw new MnemeError("INVALID_DOMAIN", `mneme/http: ${e.message}, or pass createHttpHandler(facade, { resolveCredentials })`, {
        cause: e,
      });
    throw e;
  }
};

/**
 * The route module of the built-in Account domain (registerDefaults):
 * `POST /api/accounts`, `GET /api/accounts[/{accountUuid}]`,
 * `POST /api/sessions`, `DELETE /api/sessions/current` (docs/http.md), and the
 * credential resolver of its sessions.
 * @example
 * await registerDefaults(facade, { admin });
 * const handler = createHttpHandler(facade, { modules: [accountRoutes()] });
 */
export function accountRoutes(): HttpRouteModule {
  return {
    name: "mneme/defaults accountRoutes",
    routes: [...accountEndpoints(), ...sessionEndpoints()],
    resolveCredentials: accountResolver,
  };
}

function accountEndpoints(): HttpRoute[] {
  return [
    {
      method: "POST",
      path: "/api/accounts",
      guard: guardBy(RegisterAccount),
      openapi: {
        summary: "Register an account",
        body: "payload",
        responses: { "201": { description: "the new account", schema: ACCOUNT_UUID } },
      },
      run: async (c) => {
        const out = await c.facade.dispatch(RegisterAccount, bodyAs(RegisterAccount, await c.body()), { reqCtx: c.reqCtx });
        return jsonResponse(201, { accountUuid: out.result?.accountUuid });
      },
    },
    {
      method: "GET",
      path: "/api/accounts/:accountUuid",
      guard: guardBy(GetAccount),
      openapi: {
        summary: "One account (the account itself, or system administrators)",
        query: { includeHistory: INCLUDE_HISTORY },
        responses: { "200": { description: "the account item (with historyEvents only when asked)", schema: { type: "object" } } },
      },
      run: async (c) => {
        const includeHistory = boolParam("includeHistory", c.request.searchParams.get("includeHistory"));
        const payload = { accountUuid: c.params.accountUuid!, ...(includeHistory === undefined ? {} : { includeHistory }) };
        // NOT_FOUND (404) when there is no such account: the query says so itself.
        return jsonResponse(200, await c.facade.query(GetAccount, payload, { reqCtx: c.reqCtx }));
      },
    },
    {
      method: "GET",
      path: "/api/accounts",
      guard: guardBy(ListAccounts),
      openapi: {
        summary: "A page of accounts (system administrators)",
        query: { includeHistory: INCLUDE_HISTORY, page: PAGE_PARAM, pageSize: PAGE_PARAM },
        responses: { "200": { description: "`{ items, total, page, pageSize }`", schema: { type: "object" } } },
      },
      run: async (c) => {
        const includeHistory = boolParam("includeHistory", c.request.searchParams.get("includeHistory"));
        const { page, pageSize } = readPage(pageQuery(c.request.searchParams), c.options);
        const payload = { page, pageSize, ...(includeHistory === undefined ? {} : { includeHistory }) };
        return jsonResponse(200, await c.facade.query(ListAccounts, payload, { reqCtx: c.reqCtx }));
      },
    },
  ];
}

/** Login (sets the session cookies when createHttpHandler's sessionCookies asks) and logout (clears them). */
function sessionEndpoints(): HttpRoute[] {
  return [
    {
      method: "POST",
      path: "/api/sessions",
      guard: guardBy(Login),
      openapi: {
        summary: "Log in: a session and its token",
        body: "payload",
        responses: {
          "201": {
            description: "`{ sessionUuid, sessionKey, token, accountUuid, expiresAt, identities }`; Set-Cookie with sessionCookies",
            schema: SESSION_BODY,
          },
        },
      },
      run: async (c) => {
        const out = await c.facade.dispatch(Login, bodyAs(Login, await c.body()), { reqCtx: c.reqCtx });
        const session = out.result;
        const setCookie: string[] = [];
        const cookies = c.options.sessionCookies;
        if (cookies !== false && session !== undefined) {
          setCookie.push(serializeCookie("session", session.token, cookies));
          const ids = session.identities;
          if (ids.length === 1) setCookie.push(serializeCookie("identity", ids[0]!.identityUuid, cookies));
        }
        return jsonResponse(201, session, setCookie.length === 0 ? {} : { "set-cookie": setCookie });
      },
    },
    {
      method: "DELETE",
      path: "/api/sessions/current",
      guard: guardBy(Logout),
      openapi: {
        summary: "Log out (ends the session of the credentials)",
        body: false,
        responses: { "204": { description: "signed out" } },
      },
      run: async (c) => {
        await c.facade.dispatch(Logout, {}, { reqCtx: c.reqCtx });
        const cookies = c.options.sessionCookies;
        if (cookies === false) return noContent();
        return noContent({
          "set-cookie": [
            serializeCookie("session", "", { ...cookies, maxAgeSeconds: 0 }),
            serializeCookie("identity", "", { ...cookies, maxAgeSeconds: 0 }),
          ],
        });
      },
    },
  ];
}
