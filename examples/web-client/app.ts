/**
 * The app module of the web-client example: its default export returns the
 * facade, configured and not started (server.ts starts it; `mneme seed` and
 * `mneme client` load it too). The embedded default: SQLite in one file.
 */
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { createFacade, type Facade } from "mneme";
import { accountRoutes, registerDefaults } from "mneme/defaults";
import { allowEventSubscriptions, type HttpHandlerOptions } from "mneme/http";
import { createSqliteBackends } from "mneme/sqlite";
import { TicketClosed, TicketOpened, registerBoard } from "./board.js";

/**
 * What the server gives createHttpHandler (also read by `mneme client` and `mneme openapi`):
 * the account routes (login), and session cookies, because a browser's EventSource sends
 * cookies and no Authorization header. The page is served over plain http on 127.0.0.1 by
 * default, where the cookie cannot be Secure: behind TLS, leave `secure` at its default (true).
 */
export const httpOptions: HttpHandlerOptions = {
  modules: [accountRoutes()],
  sessionCookies: { secure: process.env.BOARD_SECURE_COOKIES === "true" },
};

export default async function createApp(): Promise<Facade> {
  const filename = resolve(process.env.BOARD_DB ?? ".data/ticket-board.db");
  mkdirSync(dirname(filename), { recursive: true });
  const facade = createFacade({ appName: "ticket-board", version: "1.0.0", backend: createSqliteBackends({ filename }) });
  registerBoard(facade);
  // The page's feed: Board.Subscribe.TicketOpened and Board.Subscribe.TicketClosed, granted by "Board.*".
  allowEventSubscriptions(facade, [TicketOpened, TicketClosed]);
  await registerDefaults(facade, {
    admin: {
      email: process.env.ADMIN_EMAIL ?? "admin@board.example",
      password: process.env.ADMIN_PASSWORD ?? "the board admin's password",
    },
    // A local demo's defaults: set both in any real deployment.
    sessionSecret: process.env.SESSION_SECRET ?? "the ticket board's local session secret",
  });
  return facade;
}
