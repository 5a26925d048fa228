/**
 * A process for test/amqp/amqp-faults.int.test.ts (run with `node --import tsx`):
 * an app on a SQLite file, killed with SIGKILL by the test at points of progress.
 *
 * `publish <file> <amqp url> <exchange> <count>`: dispatches increments on
 * five counters until the store holds <count> of them, publishing each
 * through an AmqpPublisher (given the URL: mneme makes the connection);
 * prints "ready" once started and "done" once every event is published.
 * `consume <file> <amqp url> <queue> <count>`: an AmqpConsumer turns the
 * queue's messages into increments (a message with body {"poison": true}
 * always fails); prints "done" and the dead letters once <count> increments
 * are stored and a dead letter is kept.
 * Both modes print "stored <n>" with the store's increments as they grow
 * (first the count it started from), so a test can kill the process at a
 * point of progress rather than of time.
 */
import { createFacade, type Event, type Facade } from "mneme";
import { AmqpConsumer, AmqpPublisher } from "mneme/amqp";
import { createSqliteBackends } from "mneme/sqlite";
import { Counter, Increment, Incremented } from "./counter-domain.js";

const [mode, file, url, target, countText] = process.argv.slice(2);
if (mode === undefined || file === undefined || url === undefined || target === undefined || countText === undefined)
  throw new Error("usage: amqp-app-process.ts <publish|consume> <file> <amqp url> <exchange|queue> <count>");
const count = Number(countText);
const COUNTERS = [1, 2, 3, 4, 5].map((c) => `00000000-0000-4000-8000-0000000000${String(c).padStart(2, "0")}`);

const facade = createFacade({ appName: "amqp-app", ...createSqliteBackends({ filename: file, lockLeaseMs: 600, pollIntervalMs: 50 }) });
facade.registerDomain(Counter);
const retry = { maxAttempts: 3, initialDelayMs: 20, maxDelayMs: 200 };
const publisher = new AmqpPublisher(facade, {
  name: "Out",
  domain: "Counter",
  connection: url,
  exchange: target,
  confirmTimeoutMs: 1000,
  retry,
}).on(Incremented, (e) => ({ subject: "counter.incremented", body: { counter: e.aggregateUuid, by: e.payload.by } }));
const consumer = new AmqpConsumer(facade, {
  name: "In",
  domain: "Counter",
  connection: url,
  queue: target,
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
    if (now >= count && dead.length > 0) {
      console.log(JSON.stringify(dead));
      break;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}
console.log("done");
await facade.stop();
