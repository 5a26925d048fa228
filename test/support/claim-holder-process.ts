/**
 * A process for test/app/idempotency-claims.int.test.ts (run with
 * `node --import tsx`): on a SQLite file or a Postgres schema, dispatches one
 * command with the given commandUuid and a short claim lease, prints
 * "running <command>" from inside its handler and never finishes it: the test
 * kills the process with SIGKILL while it holds the claim.
 */
import { createFacade } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { Charge, Claims, hooks, Notify } from "./claims-domain.js";

const [backend, where, schema, command, commandUuid, leaseMs] = process.argv.slice(2);
if (where === undefined || schema === undefined || commandUuid === undefined || leaseMs === undefined)
  throw new Error("usage: claim-holder-process.ts sqlite|postgres <file|url> <schema> Charge|Notify <commandUuid> <leaseMs>");
const stores =
  backend === "sqlite" ? createSqliteBackends({ filename: where }) : createPostgresBackends({ connectionString: where, schema });
const facade = createFacade({ appName: "claim-holder", idempotency: { leaseMs: Number(leaseMs) }, ...stores });
facade.registerDomain(Claims);
await facade.start();
hooks.beforeEffect = async (name) => {
  process.stdout.write(`running ${name}\n`);
  // Held until the kill (bounded, so a test that fails to kill does not leave the process behind for long).
  await new Promise((r) => setTimeout(r, 60_000));
};
const reqCtx = { senderAccountUuid: "acc-k", senderSessionUuid: "s-k", senderIdentityUuid: "i-k", senderTenantUuid: "tenant-k" };
if (command === "Charge") await facade.dispatch(Charge, { accountUuid: "K", amount: 9 }, { reqCtx, commandUuid });
else await facade.dispatch(Notify, { to: "k@example.com" }, { reqCtx, commandUuid });
process.exit(3);
