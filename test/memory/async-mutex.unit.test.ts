/**
 * The memory backends' transaction lock: a free lock is taken at once
 * (tryAcquire), a held one is handed to its waiters in order, and nobody
 * slips in between a release and the next waiter.
 */
import { describe, expect, it } from "vitest";
import { AsyncMutex } from "../../src/memory/async-mutex.js";

describe("AsyncMutex", () => {
  it("tryAcquire takes a free lock at once and refuses a held one", () => {
    const m = new AsyncMutex();
    const release = m.tryAcquire();
    expect(release).toBeTypeOf("function");
    expect(m.locked).toBe(true);
    expect(m.tryAcquire()).toBeUndefined();
    release!();
    expect(m.locked).toBe(false);
    expect(m.tryAcquire()).toBeTypeOf("function");
  });

  it("hands a released lock to the waiters in order; tryAcquire cannot take it from them", async () => {
    const m = new AsyncMutex();
    const first = m.tryAcquire()!;
    const order: string[] = [];
    const a = m.acquire().then((release) => {
      order.push("a");
      return release;
    });
    const b = m.acquire().then((release) => {
      order.push("b");
      release();
    });
    first();
    expect(m.tryAcquire()).toBeUndefined();
    const releaseA = await a;
    expect(m.tryAcquire()).toBeUndefined();
    releaseA();
    releaseA(); // a second call releases nothing
    await b;
    expect(order).toEqual(["a", "b"]);
    expect(m.locked).toBe(false);
  });
});
