/**
 * The outbox's hand-off of committed entries to its worker: the worker takes
 * from memory only what it may (a listing found nothing pending, the batch
 * committed, every entry due and none cancelled), and lists the store in
 * every other case.
 */
import { describe, expect, it } from "vitest";
import { OutboxHandOff } from "../../src/reactions/outbox-handoff.js";
import type { OutboxEntry } from "../../src/reactions/outbox-entry.js";

const entry = (position: number): OutboxEntry => ({ id: `e${position}`, position }) as unknown as OutboxEntry;
const POLL = 1000;

/** A hand-off whose worker has listed the store and found nothing pending. */
function listedEmpty(now = 0): OutboxHandOff {
  const h = new OutboxHandOff();
  h.listing(now);
  h.listedEmpty();
  return h;
}

describe("OutboxHandOff", () => {
  it("lists the store until a listing found nothing pending", () => {
    const h = new OutboxHandOff();
    expect(h.take(10, 0, POLL)).toBeUndefined();
    h.listing(0);
    h.listedEmpty();
    expect(h.take(10, 0, POLL)).toEqual([]);
  });

  it("hands a batch's entries over once the handler has passed its position, in order, a page at a time", () => {
    const h = listedEmpty();
    h.batchWritten(3, [entry(1), entry(2), entry(3)], true);
    h.promote(2);
    expect(h.take(10, 1, POLL)).toEqual([]);
    h.promote(3);
    expect(h.take(2, 1, POLL)).toEqual([entry(1), entry(2)]);
    expect(h.take(2, 1, POLL)).toEqual([entry(3)]);
  });

  it("lists the store after a batch that was not whole, a rolled-back batch, an invalidation, or the poll interval", () => {
    const notWhole = listedEmpty();
    notWhole.batchWritten(1, [entry(1)], false);
    notWhole.promote(1);
    expect(notWhole.take(10, 1, POLL)).toBeUndefined();

    const rolledBack = listedEmpty();
    rolledBack.batchWritten(1, [entry(1)], true);
    rolledBack.discard();
    rolledBack.promote(1);
    expect(rolledBack.take(10, 1, POLL)).toBeUndefined();

    const invalidated = listedEmpty();
    invalidated.invalidate();
    expect(invalidated.take(10, 1, POLL)).toBeUndefined();

    const old = listedEmpty(0);
    expect(old.take(10, POLL - 1, POLL)).toEqual([]);
    expect(old.take(10, POLL, POLL)).toBeUndefined();
  });

  it("does not switch to memory when a batch committed while the store was being listed", () => {
    const h = new OutboxHandOff();
    h.batchWritten(1, [entry(1)], true);
    h.listing(0);
    h.promote(1);
    h.listedEmpty();
    expect(h.take(10, 0, POLL)).toBeUndefined();
    h.listing(0);
    h.listedEmpty();
    expect(h.take(10, 0, POLL)).toEqual([]);
  });

  it("lists the store when a batch is written before the last one was handed over, or when too many wait", () => {
    const overwritten = listedEmpty();
    overwritten.batchWritten(5, [entry(5)], true);
    overwritten.batchWritten(6, [entry(6)], true);
    overwritten.promote(6);
    expect(overwritten.take(10, 1, POLL)).toBeUndefined();

    const full = listedEmpty();
    full.batchWritten(
      10_001,
      Array.from({ length: 10_001 }, (_, i) => entry(i + 1)),
      true,
    );
    full.promote(10_001);
    expect(full.take(10, 1, POLL)).toBeUndefined();
  });
});
