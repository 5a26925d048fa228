/**
 * A process for test/nats/nats-faults.int.test.ts (run with `node --import tsx`):
 * an app on a SQLite file, killed with SIGKILL by the test at random points.
 *
 * `publish <file> <nats url> <stream> <count>`: dispatches increments on five
 * counters until the store holds <count> of them, publishing each through a
 * NatsPublisher; prints "ready" once started and "done" once every event is
 * published.
 * Both modes print "stored <n>" with the store's increments as they grow (first the count it started from), so a
 * test can kill the process at a point of progress rather than of time.
 * `consume <file> <nats url> <stream> <count>`: a NatsConsumer turns the
 * stream's messages into increments (a message with body {"poison": true}
 * always fails); prints "done" and the dead letters once <count> increments
 * are stored, a dead letter is kept and the consumer's lag on the server is 0
 * (every message acked, the redeliveries of earlier runs' messages too).
 */
import { connect } from "@nats-io/transport-node";
import { createFacade, type Event, type Facade } from "mneme";
import { NatsConsumer, NatsPublisher } from "mneme/nats";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, Increment, Incremented } from "./counter-domain.js";

const [mode, file, url, stream, countText] = process.argv.slice(2);
if (mode === undefined || file === undefined || url === undefined || stream === undefined || countText === undefined)
  throw new Error("usage: nats-app-process.ts <publish|consume> <file> <nats url> <stream> <count>");
const count = Number(countText);
export const COUNTERS = ["c0", "c1", "c2", "c3", "c4"].map((c) => `00000000-0000-4000-8000-0000000000${c.slice(1).padStart(2, "0")}`);

const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
const facade = createFacade({ appName: "nats-app", ...createSqliteBackends({ filename: file, lockLeaseMs: 600, pollIntervalMs: 50 }) });
facade.registerDomain(Counter);
const retry = { maxAttempts: 3, initialDelayMs: 20, maxDelayMs: 200 };
const publisher = new NatsPublisher(facade, { name: "Out", domain: "Counter", connection: nc, stream, ackTimeoutMs: 1000, retry }).on(
  Incremented,
  (e) => ({ subject: `${stream}.incremented`, body: { counter: e.aggregateUuid, by: e.payload.by } }),
);
const consumer = new NatsConsumer(facade, {
  name: "In",
  domain: "Counter",
  connection: nc,
  stream,
  durable: "app",
  ackWaitMs: 1000,
  concurrency: 4,
  retry,
  toCommand: (m) => {
    const b = m.body as { counter: string; by: number; poison?: boolean };
    if (b.poison === true) throw new Error("poison");
    return { command: Increment, payload: { counterUuid: b.counter, by: b.by } };
  },
});
facade.registerReadmodel(mode === "publish" ? publisher : consumer);
await facade.start();
console.log("ready");

async function increments(f: Facade): Promise<number> {
  let n = 0;
  for await (const batch of f.eventRepository.readAll({ afterPosition: 0 }))
    n += batch.filter((e: Event) => e.name === "Incremented").length;
  return n;
}

if (mode === "publish") {
  const from = await increments(facade);
  console.log(`stored ${from}`);
  for (let i = from; i < count; i++) {
    await facade.dispatch(Increment, { counterUuid: COUNTERS[i % 5]!, by: i });
    console.log(`stored ${i + 1}`);
  }
  for (;;) {
    await publisher.outbox.drain();
    if ((await publisher.outbox.counts()).pending === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
} else {
  let stored = -1;
  for (;;) {
    const now = await increments(facade);
    if (now !== stored) console.log(`stored ${(stored = now)}`);
    const dead = await facade.runtime.listDeadLetters({ eventHandlerName: "In" });
    // Done once nothing waits on the server either: redeliveries of messages an earlier (killed) run took are acked too.
    const lag = facade.runtime.listEventHandlers().find((h) => h.name === "In")?.integration?.lag;
    if (now >= count && dead.length > 0 && lag === 0) {
      console.log(JSON.stringify(dead));
      break;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}
console.log("done");
await facade.stop();
await nc.close();
