/** Restore under live traffic, a quick run; the long one (>= 1,000 interleavings) is readmodel-restore.property.long.unit.test.ts. */
import { describe, expect, it } from "vitest";
import { checkRestoreUnderLiveTraffic } from "../support/restore-property.js";

describe("restore under live traffic (property)", () => {
  it("ends in the state of a full replay, with every event applied exactly once", async () => {
    const { runs, caught } = await checkRestoreUnderLiveTraffic({ numRuns: 100, maxMs: 25_000 });
    expect(runs).toBeGreaterThanOrEqual(100);
    // the runs did exercise the hand-off: live events arrived during restorations
    expect(caught).toBeGreaterThan(0);
  });
});
