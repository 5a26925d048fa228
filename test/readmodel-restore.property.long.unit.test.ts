/**
 * Restore under live traffic over at least 1,000 random interleavings (CI runs
 * it with the rest). Bounded: fast-check interrupts after 100 s and counts that
 * as a failure; on an idle 2-core machine the file takes well under that.
 */
import { describe, expect, it } from "vitest";
import { checkRestoreUnderLiveTraffic } from "./support/restore-property.js";

const INTERLEAVINGS = 1000;

describe("restore under live traffic (property, long run)", () => {
  it(`ends in the state of a full replay over ${INTERLEAVINGS} interleavings, with every event applied exactly once`, async () => {
    const { runs, caught } = await checkRestoreUnderLiveTraffic({ numRuns: INTERLEAVINGS, maxMs: 100_000 });
    expect(runs).toBeGreaterThanOrEqual(INTERLEAVINGS);
    expect(caught).toBeGreaterThan(0);
  }, 115_000);
});
