/**
 * The orders example end to end on a SQLite file: one order that ships, one
 * whose payment is declined until it times out (its stock released), with a
 * clock the script moves on instead of waiting fifteen minutes.
 * Run: `npx tsx examples/orders/main.ts [file]` (default: a file in the temp folder).
 */
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFacade, newUuid } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { installOrders, type PaymentProvider } from "./fulfilment.js";
import { AddStockCmd, PlaceOrderCmd } from "./orders-domain.js";

const filename = process.argv[2] ?? join(tmpdir(), `orders-${newUuid()}.db`);
let now = Date.now();
const declined = new Set<string>();
const provider: PaymentProvider = {
  charge: ({ orderUuid, idempotencyKey }) =>
    declined.has(orderUuid) ? Promise.reject(new Error("card declined")) : Promise.resolve({ chargeId: `ch_${idempotencyKey}` }),
};

const facade = createFacade({ appName: "shop", backend: createSqliteBackends({ filename }) });
const { fulfilment, gateway } = installOrders(facade, {
  provider,
  paymentTimeoutMs: 15 * 60_000,
  clock: () => now,
  retry: { maxAttempts: 3, initialDelayMs: 1000 },
});
await facade.start();
const reqCtx = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t" };
await facade.dispatch(AddStockCmd, { sku: "book", quantity: 10 }, { reqCtx });

const shipped = newUuid();
const unpaid = newUuid();
declined.add(unpaid);
await facade.dispatch(PlaceOrderCmd, { orderUuid: shipped, sku: "book", quantity: 2, amount: 30 }, { reqCtx });
await facade.dispatch(PlaceOrderCmd, { orderUuid: unpaid, sku: "book", quantity: 3, amount: 45 }, { reqCtx });

/** Lets the reactions run until nothing is due at the current time. */
async function settle(): Promise<void> {
  for (;;) {
    const head = await facade.eventRepository.headPosition();
    while (fulfilment.lastPosition < head || gateway.lastPosition < head) await new Promise((r) => setTimeout(r, 5));
    await fulfilment.outbox.drain();
    await gateway.outbox.drain();
    if ((await facade.eventRepository.headPosition()) === head) return;
  }
}

const history = async (orderUuid: string) => (await facade.eventRepository.loadAggregate(orderUuid)).map((e) => e.name).join(" -> ");
await settle();
for (const minutes of [1, 2, 4, 15]) {
  now += minutes * 60_000;
  await settle();
}
console.log(`shipped: ${await history(shipped)}`);
console.log(`unpaid:  ${await history(unpaid)}`);
console.log(`dead letters: ${(await facade.runtime.listDeadLetters()).length}`);
await facade.stop();
