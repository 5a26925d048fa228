/**
 * A counter readmodel for fencing tests: totals per counter, and per position
 * how many times its application was committed (a document per position, read
 * and rewritten in the batch, so a batch that commits twice shows 2). A hold
 * keeps the handler on one position after its batch has begun.
 */
import { BaseReadmodel, type Event, type Facade } from "mneme";
import { Incremented } from "./counter-domain.js";

/** A promise to wait on, opened from outside. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/**
 * Totals per counter plus, per position, how many times its application was
 * committed (a document per position, read and rewritten in the batch). A
 * gate can hold the handler on one position, after it has started its batch.
 */
export class GatedTotals extends BaseReadmodel {
  holdAt: { position: number; entered: () => void; wait: Promise<void> } | undefined;
  /** A pause in every application (ms): keeps batches in flight while a test moves the lock. */
  delayMs = 0;

  constructor(facade: Facade) {
    super(facade);
    this.domain = "Counter";
    this.name = "GatedTotals";
    this.addDomainEventHandler(Incremented, async (_ctx, event: Event<Incremented>, p) => {
      const hold = this.holdAt;
      if (hold !== undefined && hold.position === event.position) {
        this.holdAt = undefined;
        hold.entered();
        await hold.wait;
      }
      if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
      const totals = this.collection<{ total: number }>("totals");
      await totals.put(event.aggregateUuid, { total: ((await totals.get(event.aggregateUuid))?.total ?? 0) + p.by });
      const applied = this.collection<{ position: number; times: number }>("applied");
      const key = String(event.position);
      await applied.put(key, { position: event.position, times: ((await applied.get(key))?.times ?? 0) + 1 });
    });
  }

  async total(counterUuid: string): Promise<number> {
    return (await this.collection<{ total: number }>("totals").get(counterUuid))?.total ?? 0;
  }

  /** Position -> how many committed applications. */
  async appliedTimes(): Promise<Record<number, number>> {
    const docs = await this.collection<{ position: number; times: number }>("applied").list({ limit: 1000 });
    return Object.fromEntries(docs.map((d) => [d.position, d.times]));
  }
}
