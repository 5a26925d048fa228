/**
 * The options of claims are checked once, at construction: bad idempotency
 * options and a command store offering only some of the claim methods are
 * refused with INVALID_REQUEST; a store offering none keeps the in-process
 * behaviour (duplicates serialised, the record looked up first).
 */
import { describe, expect, it } from "vitest";
import { anonymous, createFacade, defineDomain, isMnemeError } from "mneme";
import { PostgresCommandStore } from "mneme/postgres";
import { MemoryCommandStore } from "mneme/memory";

function refused(make: () => unknown): string {
  try {
    make();
  } catch (e) {
    if (isMnemeError(e, "INVALID_REQUEST")) return e.message;
    throw e;
  }
  return expect.fail("not refused");
}

describe("claim options", () => {
  it("refuses a lease under 10 ms, a negative or fractional wait, and an unknown claimCommit", () => {
    expect(refused(() => createFacade({ idempotency: { leaseMs: 5 } }))).toMatch(/leaseMs must be an integer >= 10/);
    expect(refused(() => createFacade({ idempotency: { waitMs: -1 } }))).toMatch(/waitMs must be an integer >= 0/);
    expect(refused(() => createFacade({ idempotency: { waitMs: 1.5 } }))).toMatch(/waitMs/);
    const pool = { query: async () => ({ rows: [] }), connect: async () => ({}), on: () => undefined };
    expect(refused(() => new PostgresCommandStore({ pool: pool as never, claimCommit: "later" as never }))).toMatch(/claimCommit/);
  });

  it("refuses a command store with some of claim, renewClaim and releaseClaim", () => {
    const store = new MemoryCommandStore();
    const partial = Object.assign(Object.create(store) as MemoryCommandStore, { renewClaim: undefined, releaseClaim: undefined });
    expect(refused(() => createFacade({ commandStore: partial }))).toMatch(/all three or none|offer all/);
  });

  it("keeps a store without claims working: a duplicate after a success is replayed, its handler not run again", async () => {
    const store = new MemoryCommandStore();
    const plain = Object.assign(Object.create(store) as MemoryCommandStore, {
      claim: undefined,
      renewClaim: undefined,
      releaseClaim: undefined,
    });
    const D = defineDomain("NoClaims");
    const Ping = D.command<{ n: number }>("Ping", { permission: anonymous });
    let runs = 0;
    D.handleCommand(Ping, () => {
      runs++;
    });
    const f = createFacade({ commandStore: plain }).registerDomain(D);
    await f.start();
    try {
      const reqCtx = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i" };
      const [a, b] = await Promise.all([
        f.dispatch(Ping, { n: 1 }, { reqCtx, commandUuid: "p-1" }),
        f.dispatch(Ping, { n: 1 }, { reqCtx, commandUuid: "p-1" }),
      ]);
      expect(runs).toBe(1);
      expect([a.replayed, b.replayed].filter((r) => r === true)).toHaveLength(1);
    } finally {
      await f.stop();
    }
  });
});
