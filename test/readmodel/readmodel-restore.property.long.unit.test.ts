/**
 * Restore under live traffic over at least 1,000 random interleavings (CI runs
 * it with the rest). Bounded: fast-check interrupts after 300 s and counts that
 * as a failure. The runs are CPU-bound (about 100 s on an idle core of the
 * development machine, more beside other test files), so the bound is three
 * times that: only a hang or a many-fold slowdown trips it.
 */
import { describe, expect, it } from "vitest";
import { checkRestoreUnderLiveTraffic } from "../support/restore-property.js";

const INTERLEAVINGS = 1000;

describe("restore under live traffic (property, long run)", () => {
  it(`ends in the state of a full replay over ${INTERLEAVINGS} interleavings, with every event applied exactly once`, async () => {
    const { runs, caught } = await checkRestoreUnderLiveTraffic({ numRuns: INTERLEAVINGS, maxMs: 300_000 });
    expect(runs).toBeGreaterThanOrEqual(INTERLEAVINGS);
    expect(caught).toBeGreaterThan(0);
  }, 330_000);
});
