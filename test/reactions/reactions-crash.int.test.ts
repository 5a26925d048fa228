/**
 * Crash safety of reactions with real processes: the orders example runs in a
 * child process that is killed with SIGKILL at random points of its chains,
 * again and again, on a SQLite file and on a Postgres schema; a last run goes
 * on until every order is at rest. Then, from the stored events, the command
 * records and the payment provider's log: every command's effect happened
 * exactly once, every external call was made at least once and always with
 * the same dedupe key, and no scheduled command was lost or fired twice.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createFacade, type Event, newUuid } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { reactionCommandUuid, reactionDedupeKey } from "mneme/reactions";
import { createSqliteBackends } from "mneme/sqlite";
import { Inventory, Orders } from "../../examples/orders/orders-domain.js";
import { ORDERS, orderUuidOf, refused } from "../support/reactions-chain.js";
import { runKillable } from "../support/run-process.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const dir = mkdtempSync(join(tmpdir(), "mneme-reactions-crash-"));
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
const schemas: string[] = [];
afterAll(async () => {
  for (const s of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
});

const script = fileURLToPath(new URL("../support/reactions-chain-process.ts", import.meta.url));
const cwd = fileURLToPath(new URL("../..", import.meta.url));

/** Runs the chain process; kills it with SIGKILL `killAfterMs` after it is ready (or lets it finish when undefined). */
function run(args: string[], killAfterMs?: number): ReturnType<typeof runKillable> {
  return runKillable(script, args, cwd, killAfterMs);
}

function countBy<T>(items: readonly T[], key: (t: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const t of items) m.set(key(t), (m.get(key(t)) ?? 0) + 1);
  return m;
}

describe.each(["sqlite", "postgres"] as const)("reactions survive SIGKILL on %s", (backend) => {
  it("every command's effect once, every external call at least once with one key, no scheduled command lost or fired twice", async () => {
    const location = backend === "sqlite" ? join(dir, `${newUuid()}.db`) : `reactions_crash_${newUuid().replace(/-/g, "").slice(-12)}`;
    if (backend === "postgres") schemas.push(location);
    const log = join(dir, `${newUuid()}.log`);
    const kills: number[] = [];
    for (let round = 0; round < 6; round++) {
      const after = 30 + Math.floor(Math.random() * 700);
      kills.push(after);
      const r = await run([backend, location, log, "crash"], after);
      expect(r.signal, `round ${round} (kills after ${kills.join(", ")} ms)`).toBe("SIGKILL");
    }
    const last = await run([backend, location, log, "finish"]);
    expect(last.out, `kills after ${kills.join(", ")} ms`).toContain("done");
    expect(last.code).toBe(0);

    const f = createFacade({
      appName: "chain",
      ...(backend === "sqlite"
        ? createSqliteBackends({ filename: location })
        : createPostgresBackends({ connectionString: DATABASE_URL, schema: location, poolSize: 4 })),
    });
    f.registerDomain(Orders).registerDomain(Inventory);
    await f.start();
    try {
      const events: Event[] = [];
      for await (const batch of f.eventRepository.readAll({ afterPosition: 0 })) events.push(...batch);
      const calls = existsSync(log)
        ? readFileSync(log, "utf8")
            .split("\n")
            .filter((l) => l !== "")
            .map((l) => JSON.parse(l) as { orderUuid: string; idempotencyKey: string })
        : [];
      // No command appended anything twice: one event per (command, aggregate, name).
      for (const [k, n] of countBy(events, (e) => `${e.commandUuid} ${e.aggregateUuid} ${e.name}`)) expect(n, k).toBe(1);
      expect(events.filter((e) => e.name === "StockAdded")).toHaveLength(1);
      let available = 1000;
      for (let i = 0; i < ORDERS; i++) {
        const orderUuid = orderUuidOf(i);
        const own = events.filter((e) => e.aggregateUuid === orderUuid || (e.payload as { orderUuid?: string }).orderUuid === orderUuid);
        const names = own.map((e) => e.name);
        const placed = own.find((e) => e.name === "OrderPlaced")!;
        const reserved = own.find((e) => e.name === "StockReserved")!;
        const requested = own.find((e) => e.name === "PaymentRequested")!;
        expect(placed, `order ${i}: ${names.join(", ")}`).toBeDefined();
        expect(reserved, `order ${i}: ${names.join(", ")}`).toBeDefined();
        if (requested === undefined) {
          // What the chain did instead: its events with their commands and causes, and the record of its RequestPayment.
          const sent = await f.commandStore.get(reactionCommandUuid("Fulfilment", reserved.eventUuid, 0));
          const story = own.map((e) => `${e.name} (event ${e.eventUuid}, command ${e.commandUuid}, cause ${e.reqCtx.causationId})`);
          expect.fail(`order ${i}: no PaymentRequested: ${story.join("; ")}; RequestPayment record: ${JSON.stringify(sent)}`);
        }
        // The external call: at least once, always with the dedupe key of (PaymentRequested, PaymentGateway).
        const key = reactionDedupeKey("PaymentGateway", requested.eventUuid);
        const mine = calls.filter((c) => c.orderUuid === orderUuid);
        expect(mine.length, `order ${i}`).toBeGreaterThanOrEqual(1);
        expect(new Set(mine.map((c) => c.idempotencyKey)), `order ${i}`).toEqual(new Set([key]));
        // The payment timeout: scheduled by StockReserved's step (its second reaction), fired at most once.
        const timeout = reactionCommandUuid("Fulfilment", reserved.eventUuid, 1);
        const timeoutRecord = await f.commandStore.get(timeout);
        const quantity = 1 + (i % 4);
        if (refused(i)) {
          expect(names.sort(), `order ${i}`).toEqual([
            "OrderCancelled",
            "OrderPlaced",
            "PaymentRequested",
            "StockReleased",
            "StockReserved",
          ]);
          const cancelled = own.find((e) => e.name === "OrderCancelled")!;
          expect(cancelled.commandUuid, `order ${i}: cancelled by its timeout`).toBe(timeout);
          expect(timeoutRecord?.status).toBe("succeeded");
          expect(timeoutRecord?.eventUuids).toEqual([cancelled.eventUuid]);
          const released = own.find((e) => e.name === "StockReleased")!;
          expect(released.commandUuid).toBe(reactionCommandUuid("Fulfilment", cancelled.eventUuid, 0));
        } else {
          // Charged and shipped, unless the charge came after the timeout (a slow machine): then cancelled and released.
          const shipped = names.includes("OrderShipped");
          expect(names.sort(), `order ${i}`).toEqual(
            shipped
              ? ["OrderPlaced", "OrderShipped", "PaymentCharged", "PaymentRequested", "StockReserved"]
              : ["OrderCancelled", "OrderPlaced", "PaymentRequested", "StockReleased", "StockReserved"],
          );
          if (shipped) {
            available -= quantity;
            // Cancelled by the charge's step, or (a restart late past its time) fired before it and found the order paid.
            expect(timeoutRecord?.eventUuids ?? [], `order ${i}: its timeout changed nothing`).toEqual([]);
            const charged = own.find((e) => e.name === "PaymentCharged")!;
            expect(charged.commandUuid).toBe(key);
          }
        }
      }
      const stockEvents = events.filter((e) => e.aggregateUuid === "book");
      const stock = stockEvents.reduce((s, e) => {
        const p = e.payload as { quantity: number };
        if (e.name === "StockAdded") return s + p.quantity;
        if (e.name === "StockReserved") return s - p.quantity;
        if (e.name === "StockReleased") return s + p.quantity;
        return s;
      }, 0);
      expect(stock).toBe(available);
    } finally {
      await f.stop();
    }
  }, 180_000);
});
