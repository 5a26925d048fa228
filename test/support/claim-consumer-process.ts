/**
 * A process for test/integration/consumer-dead-claim.int.test.ts (run with `node --import
 * tsx`): a consumer app on a SQLite file or a Postgres schema whose command
 * handler prints "running" and never finishes, so the test can kill it with
 * SIGKILL while the message's command holds its claim (a lease of ten
 * minutes: only a takeover lets another instance run it before then).
 */
import { connect as natsConnect } from "@nats-io/transport-node";
import { createFacade } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { claimConsumer } from "./claim-consumer.js";
import { Claims, hooks } from "./claims-domain.js";

const [broker, backend, where, schema, source, brokerUrl] = process.argv.slice(2);
if (brokerUrl === undefined)
  throw new Error("usage: claim-consumer-process.ts amqp|nats sqlite|postgres <file|url> <schema> <queue|stream> <broker url>");
const stores =
  backend === "sqlite" ? createSqliteBackends({ filename: where! }) : createPostgresBackends({ connectionString: where!, schema: schema! });
const facade = createFacade({ appName: "claim-consumer", idempotency: { leaseMs: 600_000 }, ...stores });
facade.registerDomain(Claims);
const connection = broker === "nats" ? await natsConnect({ servers: brokerUrl }) : brokerUrl;
facade.registerReadmodel(claimConsumer(facade, broker as "amqp" | "nats", connection, source!));
hooks.beforeEffect = async (name) => {
  process.stdout.write(`running ${name}\n`);
  // Held until the kill (bounded, so a test that fails to kill does not leave the process behind for long).
  await new Promise((r) => setTimeout(r, 60_000));
};
await facade.start();
