/**
 * Read your writes for sessions across instances: two facades on one store
 * (one SQLite file, one Postgres schema), each serving its own HTTP handler.
 * The token a login returns on one instance is accepted by the very next
 * request on the other, every time; a session ended on one is refused at
 * once on both; an unknown session or a wrong key is refused.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createFacade, newUuid, type Facade, type FacadeOptions } from "mneme";
import { accountRoutes, registerDefaults } from "mneme/defaults";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING } from "../support/defaults-world.js";
import { call, serve } from "../support/http-fixture.js";
import { sharedPlaces } from "../support/shared-places.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c().catch(() => undefined);
});

interface Instance {
  facade: Facade;
  url: string;
  adminAccountUuid: string;
}

async function instance(stores: Partial<FacadeOptions>): Promise<Instance> {
  const facade = createFacade({ appName: "sessions-ryw", ...stores });
  const info = await registerDefaults(facade, {
    admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD },
    passwordHashing: FAST_HASHING,
    sessionSecret: "one secret for every instance",
  });
  await facade.start();
  closers.push(() => facade.stop());
  const routes = accountRoutes();
  // The module's own resolver (the fixture's default is a test resolver).
  const server = await serve(facade, { modules: [routes], resolveCredentials: routes.resolveCredentials! });
  closers.push(server.close);
  return { facade, url: server.url, adminAccountUuid: info.adminAccountUuid };
}

interface Login {
  token: string;
  sessionUuid: string;
  identities: { identityUuid: string }[];
}

async function login(on: Instance): Promise<Login> {
  const r = await call(on.url, "POST", "/api/sessions", { body: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as Login;
}

function asAdmin(s: Login, token = s.token): Record<string, string> {
  return { authorization: `Bearer ${token}`, "x-identity-uuid": s.identities[0]!.identityUuid };
}

describe.each(sharedPlaces("sessions_ryw"))("sessions across two instances (%s)", (_name, place) => {
  it("the token of a login on one instance is accepted by the next request on the other, 50 times out of 50", async () => {
    const stores = place();
    const a = await instance(stores());
    const b = await instance(stores());
    const refused: unknown[] = [];
    for (let i = 0; i < 50; i++) {
      const [from, to] = i % 2 === 0 ? [a, b] : [b, a];
      const s = await login(from);
      const r = await call(to.url, "GET", `/api/accounts/${to.adminAccountUuid}`, { headers: asAdmin(s) });
      if (r.status !== 200) refused.push({ i, status: r.status, body: r.body });
    }
    expect(refused).toEqual([]);
  }, 120_000);

  it("a session ended on one instance is refused at once on both; an unknown session or a wrong key is refused", async () => {
    const stores = place();
    const a = await instance(stores());
    const b = await instance(stores());
    for (let i = 0; i < 5; i++) {
      const s = await login(a);
      const path = `/api/accounts/${a.adminAccountUuid}`;
      expect((await call(b.url, "GET", path, { headers: asAdmin(s) })).status).toBe(200);
      expect((await call(a.url, "DELETE", "/api/sessions/current", { headers: asAdmin(s) })).status).toBe(204);
      expect((await call(b.url, "GET", path, { headers: asAdmin(s) })).status).toBe(401);
      expect((await call(a.url, "GET", path, { headers: asAdmin(s) })).status).toBe(401);
      const key = s.token.slice(s.token.indexOf(".") + 1);
      expect((await call(b.url, "GET", path, { headers: asAdmin(s, `${newUuid()}.${key}`) })).status).toBe(401);
      const fresh = await login(b);
      const wrongKey = `${fresh.sessionUuid}.${key}`;
      expect((await call(a.url, "GET", path, { headers: asAdmin(fresh, wrongKey) })).status).toBe(401);
      expect((await call(a.url, "GET", path, { headers: asAdmin(fresh) })).status).toBe(200);
    }
  }, 120_000);
});
