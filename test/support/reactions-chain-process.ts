/**
 * A process for test/reactions/reactions-crash.int.test.ts (run with `node --import tsx`):
 * the orders example on a SQLite file or a Postgres schema, with a payment
 * provider outside the process (a log file: every call is a line, and a
 * charge is made once per idempotency key). It places ORDERS orders (those
 * not placed yet) and lets the chain run until the test kills it with
 * SIGKILL; with "finish" it runs until every order has come to rest, prints
 * "done" and exits 0. Orders whose number is a multiple of 3 are refused by
 * the provider, so their payment times out and their stock is released.
 */
import { appendFileSync } from "node:fs";
import { v5 as uuidv5 } from "uuid";
import { createFacade, type Facade } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { installOrders, type PaymentProvider } from "../../examples/orders/fulfilment.js";
import { AddStockCmd, Order, PlaceOrderCmd, Stock } from "../../examples/orders/orders-domain.js";

import { NS, ORDERS, orderUuidOf, PAYMENT_TIMEOUT_MS, placeCommandOf, refused } from "./reactions-chain.js";

const [backend, location, logFile, mode] = process.argv.slice(2);
if (backend === undefined || location === undefined || logFile === undefined || mode === undefined)
  throw new Error("usage: reactions-chain-process.ts <sqlite|postgres> <file|schema> <log> <crash|finish>");

const refusedOrders = new Set(
  Array.from({ length: ORDERS }, (_, i) => i)
    .filter(refused)
    .map(orderUuidOf),
);
const provider: PaymentProvider = {
  charge(request) {
    appendFileSync(logFile, `${JSON.stringify(request)}\n`);
    if (refusedOrders.has(request.orderUuid)) return Promise.reject(new Error("card declined"));
    return Promise.resolve({ chargeId: `ch_${request.idempotencyKey}` });
  },
};

const backends =
  backend === "sqlite"
    ? createSqliteBackends({ filename: location, lockLeaseMs: 600, pollIntervalMs: 50 })
    : createPostgresBackends({
        connectionString: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
        schema: location,
        poolSize: 6,
        pollIntervalMs: 50,
      });
// Short leases, as for the SQLite lock above: a command claimed by a killed process is retried once its claim's
// lease runs out (default 30 s), and the payment timeout (1.5 s) must not overtake the retry of RequestPayment.
const facade: Facade = createFacade({
  appName: "chain",
  ...backends,
  delivery: { lockRetryMs: 100 },
  idempotency: { leaseMs: 600 },
});
const { fulfilment, gateway } = installOrders(facade, {
  provider,
  paymentTimeoutMs: PAYMENT_TIMEOUT_MS,
  pollMs: 20,
  retry: { maxAttempts: 3, initialDelayMs: 20, maxDelayMs: 200 },
});
await facade.start();
process.stdout.write("ready\n");
await facade.dispatch(AddStockCmd, { sku: "book", quantity: 1000 }, { commandUuid: uuidv5("stock", NS) });
for (let i = 0; i < ORDERS; i++) {
  if ((await facade.eventRepository.loadAggregate(orderUuidOf(i))).length > 0) continue;
  await facade.dispatch(
    PlaceOrderCmd,
    { orderUuid: orderUuidOf(i), sku: "book", quantity: 1 + (i % 4), amount: 10 * (i + 1) },
    { commandUuid: placeCommandOf(i) },
  );
  await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 30)));
}

/** Every order shipped, or cancelled with no stock reserved for it, and nothing pending in either outbox. */
async function atRest(): Promise<boolean> {
  const stock = (await facade.eventRepository.loadAggregate("book")).reduce((s, e) => Stock.apply(s, e), Stock.initialState());
  for (let i = 0; i < ORDERS; i++) {
    const status = (await facade.eventRepository.loadAggregate(orderUuidOf(i))).reduce(
      (s, e) => Order.apply(s, e),
      Order.initialState(),
    ).status;
    if (status !== "shipped" && status !== "cancelled") return false;
    if (status === "cancelled" && stock.reserved[orderUuidOf(i)] !== undefined) return false;
  }
  return (
    (await fulfilment.outbox.list({ status: "pending" })).length === 0 && (await gateway.outbox.list({ status: "pending" })).length === 0
  );
}

if (mode === "finish") {
  for (let i = 0; i < 600; i++) {
    if (fulfilment.state === "running" && gateway.state === "running" && (await atRest())) {
      await facade.stop();
      process.stdout.write("done\n");
      process.exit(0);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  process.stdout.write("not at rest\n");
  process.exit(2);
}
// "crash": keep running until killed (bounded).
await new Promise((r) => setTimeout(r, 60_000));
process.exit(3);
