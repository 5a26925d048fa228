import { describe, expect, it } from "vitest";
import { newUuid, nowNs } from "mneme";

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("clock and ids", () => {
  it("newUuid makes RFC 9562 v7 ids that sort in creation order, unique across 200,000 calls", () => {
    const ids = Array.from({ length: 200_000 }, () => newUuid());
    for (const id of ids.slice(0, 1000)) expect(id).toMatch(V7);
    expect(new Set(ids).size).toBe(ids.length);
    const sorted = [...ids].sort();
    expect(sorted).toEqual(ids);
  });

  it("embeds the current millisecond", () => {
    const before = Date.now();
    const id = newUuid();
    const ms = Number.parseInt(id.replace(/-/g, "").slice(0, 12), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThan(before + 1000);
  });

  it("nowNs is integral, in nanoseconds and strictly increasing", () => {
    let last = nowNs();
    expect(Number.isInteger(last)).toBe(true);
    expect(Math.abs(last / 1e6 - Date.now())).toBeLessThan(1000);
    for (let i = 0; i < 10_000; i++) {
      const n = nowNs();
      expect(n).toBeGreaterThan(last);
      last = n;
    }
  });
});
