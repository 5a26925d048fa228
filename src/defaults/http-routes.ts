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
      run: async (c) => {
        const out = await c.facade.dispatch(RegisterAccount, bodyAs(RegisterAccount, await c.body()), { reqCtx: c.reqCtx });
        return jsonResponse(201, { accountUuid: out.result?.accountUuid });
      },
    },
    {
      method: "GET",
      path: "/api/accounts/:accountUuid",
      guard: guardBy(GetAccount),
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
