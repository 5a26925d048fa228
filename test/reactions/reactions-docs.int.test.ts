/**
 * Keeps docs/reactions.md honest: every ts block of it is code of
 * examples/orders (line by line, indentation aside), the example's script
 * runs to the outcome the page describes, and the operator tools it quotes
 * work against the Runtime with their permissions.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { isMnemeError, newUuid } from "mneme";
import { installOrders } from "../../examples/orders/fulfilment.js";
import { cancelTimeout, pendingTimeouts, retryDeadCharges } from "../../examples/orders/operations.js";
import { AddStockCmd, PlaceOrderCmd } from "../../examples/orders/orders-domain.js";
import { ADMIN, USER, authorizer } from "../runtime/runtime-fixture.js";
import { runProcess } from "../support/run-process.js";
import { FakeClock, RecordingProvider, reactionWorlds, settle } from "../support/reactions-world.js";

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");
const lines = (text: string): string[] => text.split("\n").map((l) => l.trim());

/** True when the block's lines occur one after another in the file. */
function occursIn(block: string, file: string): boolean {
  const b = lines(block).filter((l, i, all) => l !== "" || (i > 0 && i < all.length - 1));
  const f = lines(file);
  for (let i = 0; i + b.length <= f.length; i++) if (b.every((l, k) => f[i + k] === l)) return true;
  return false;
}

const dir = mkdtempSync(join(tmpdir(), "mneme-reactions-docs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const worlds = reactionWorlds();

describe("docs/reactions.md", () => {
  it("shows only code of examples/orders", () => {
    const blocks = [...read("docs/reactions.md").matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
    const files = readdirSync(new URL("../../examples/orders/", import.meta.url))
      .filter((f) => f.endsWith(".ts"))
      .map((f) => read(`examples/orders/${f}`));
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    for (const block of blocks)
      expect(
        files.some((f) => occursIn(block, f)),
        block,
      ).toBe(true);
  });

  it("the example's script ships one order and times the unpaid one out", async () => {
    const cwd = fileURLToPath(new URL("../..", import.meta.url));
    const r = await runProcess("npx", ["tsx", "examples/orders/main.ts", join(dir, "orders.db")], cwd);
    expect(r.stderr.trim()).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      [
        "shipped: OrderPlaced -> PaymentRequested -> PaymentCharged -> OrderShipped",
        "unpaid:  OrderPlaced -> PaymentRequested -> OrderCancelled",
        "dead letters: 1",
        "",
      ].join("\n"),
    );
  }, 120_000);

  it("the operator tools list and cancel timeouts and retry dead charges (actions: administrators only)", async () => {
    const clock = new FakeClock();
    const provider = new RecordingProvider();
    const facade = worlds("memory").facade("shop", { authorizer });
    const { fulfilment, gateway } = installOrders(facade, {
      provider,
      paymentTimeoutMs: 60_000,
      clock: clock.now,
      retry: { maxAttempts: 1 },
    });
    await facade.start();
    const settled = () => settle(facade, [fulfilment, gateway], clock.now);
    await facade.dispatch(AddStockCmd, { sku: "book", quantity: 5 }, { reqCtx: USER });
    provider.failNext = 1;
    const orderUuid = newUuid();
    await facade.dispatch(PlaceOrderCmd, { orderUuid, sku: "book", quantity: 1, amount: 10 }, { reqCtx: USER });
    await settled();
    const [timeout, ...more] = await pendingTimeouts(facade, USER);
    expect(more).toEqual([]);
    expect(timeout).toMatchObject({ name: "CancelOrder", payload: { orderUuid } });
    const denied = await cancelTimeout(facade, USER, timeout!.commandUuid).catch((e: unknown) => e);
    expect(isMnemeError(denied, "PERMISSION_DENIED")).toBe(true);
    expect((await cancelTimeout(facade, ADMIN, timeout!.commandUuid)).commandUuid).toBe(timeout!.commandUuid);
    expect(await pendingTimeouts(facade, USER)).toEqual([]);
    expect(await retryDeadCharges(facade, ADMIN)).toHaveLength(1);
    await settled();
    expect((await facade.eventRepository.loadAggregate(orderUuid)).map((e) => e.name)).toEqual([
      "OrderPlaced",
      "PaymentRequested",
      "PaymentCharged",
      "OrderShipped",
    ]);
    expect(await retryDeadCharges(facade, ADMIN)).toEqual([]);
  });
});
