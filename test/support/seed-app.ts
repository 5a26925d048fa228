/**
 * The `--app` module of test/cli/cli-seed.int.test.ts: a helpdesk app with the
 * built-in domains on the SQLite file named by SEED_FILE (fast password
 * hashing: the test logs in with the seeded passwords).
 */
import { createFacade, defineDomain, type Facade } from "mneme";
import { registerDefaults } from "mneme/defaults";
import { createSqliteBackends } from "mneme/sqlite";

export const Helpdesk = defineDomain("Helpdesk");
export const OpenTicket = Helpdesk.command<{ title: string }>("OpenTicket");
export const CloseTicket = Helpdesk.command<{ ticketUuid: string }>("CloseTicket");
export const ADMIN = { email: "admin@helpdesk.test", password: "the admin's long password" };

export default async function createApp(): Promise<Facade> {
  const filename = process.env.SEED_FILE;
  if (filename === undefined) throw new Error("SEED_FILE is not set");
  const facade = createFacade({ appName: "helpdesk", ...createSqliteBackends({ filename }) });
  facade.registerDomain(Helpdesk, (d) => {
    d.handleCommand(OpenTicket, () => []);
    d.handleCommand(CloseTicket, () => []);
  });
  await registerDefaults(facade, { admin: ADMIN, passwordHashing: { N: 1024 } });
  return facade;
}
