/**
 * The library app (library-app.ts) started on SQLite or Postgres, seeded with
 * a tenant whose librarians may do everything in the Library domain (Ann) and
 * a member without a group (Bob), and served over node:http with the app's
 * httpOptions; `login` gives a session's token, identity and tenant.
 */
import { createServer } from "node:http";
import type { Facade } from "mneme";
import { parseSeedDocument, seedDefaults } from "../../src/defaults/seed.js";
import { createHttpHandler, type HttpHandlerOptions, toNodeListener } from "mneme/http";
import createApp, { ADMIN, httpOptions } from "./library-app.js";
import { listenLocal } from "./http-fixture.js";

export const ANN = { email: "ann@library.test", password: "ann's long enough password" };
export const BOB = { email: "bob@library.test", password: "bob's long enough password" };

export interface LibraryWorld {
  facade: Facade;
  url: string;
  close(): Promise<void>;
}

export interface Session {
  token: string;
  accountUuid: string;
  identityUuid: string;
  tenantUuid: string;
}

/** Starts the app on `db` (a SQLite file, or a postgres:// URL with `schema`), seeds it and serves it. */
export async function startLibrary(db: string, schema?: string, extra: HttpHandlerOptions = {}): Promise<LibraryWorld> {
  process.env.LIBRARY_DB = db;
  if (schema === undefined) delete process.env.LIBRARY_SCHEMA;
  else process.env.LIBRARY_SCHEMA = schema;
  const facade = await createApp();
  await facade.start();
  await seedDefaults(
    facade,
    parseSeedDocument({
      tenants: [{ name: "Town", groups: [{ name: "librarians", permissions: ["Library.*"] }] }],
      accounts: [
        { ...ANN, identities: [{ tenant: "Town", groups: ["librarians"] }] },
        { ...BOB, identities: [{ tenant: "Town" }] },
      ],
    }),
  );
  const handler = createHttpHandler(facade, { ...httpOptions, ...extra });
  const listener = toNodeListener(handler);
  const server = createServer((req, res) => void listener(req, res));
  const { url, close } = await listenLocal(server);
  return {
    facade,
    url,
    close: async () => {
      await close();
      await facade.stop();
    },
  };
}

/** Logs in over HTTP; the identity is the account's first (Ann and Bob have one, in Town; the admin's is in the system tenant). */
export async function login(url: string, who: { email: string; password: string } = ADMIN): Promise<Session> {
  const res = await fetch(`${url}/api/sessions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(who),
  });
  if (res.status !== 201) throw new Error(`login of ${who.email}: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { token: string; accountUuid: string; identities: { identityUuid: string; tenantUuid: string }[] };
  const identity = body.identities[0]!;
  return { token: body.token, accountUuid: body.accountUuid, identityUuid: identity.identityUuid, tenantUuid: identity.tenantUuid };
}
