/** A tiny domain for readmodel tests: counters that are incremented. */
import { AllEvents, BaseReadmodel, defineDomain, type Event, type Facade, type ReadmodelOption, anonymous } from "mneme";

export interface Increment {
  counterUuid: string;
  by: number;
}
export interface Incremented {
  by: number;
}

export const Counter = defineDomain("Counter", { description: "Counters for tests" });
export const Increment = Counter.command<Increment>("Increment", { permission: anonymous });
export const IncrementMany = Counter.command<{ counterUuids: string[]; by: number }>("IncrementMany", { permission: anonymous });
export const Incremented = Counter.event<Incremented>("Incremented");
export const Noted = Counter.event<{ text: string }>("Noted");
export const Note = Counter.command<{ counterUuid: string; text: string }>("Note", { permission: anonymous });

Counter.handleCommand(Increment, (_ctx, _c, p) => [Incremented.create(p.counterUuid, { by: p.by })]);
Counter.handleCommand(IncrementMany, (_ctx, _c, p) => p.counterUuids.map((u) => Incremented.create(u, { by: p.by })));
Counter.handleCommand(Note, (_ctx, _c, p) => [Noted.create(p.counterUuid, { text: p.text })]);

/**
 * Sums per counter in a collection, and records every applied position in
 * memory so a test can check that each event was applied exactly once.
 */
export class CounterTotals extends BaseReadmodel {
  applied: number[] = [];
  failOn: ((e: Event) => boolean) | undefined;
  delayMs = 0;

  constructor(facade: Facade, name = "CounterTotals", ...options: ReadmodelOption[]) {
    super(facade, ...options);
    this.domain = "Counter";
    this.name = name;
    this.addDomainEventHandler(Incremented, async (_ctx, event, p) => {
      if (this.failOn?.(event)) throw new Error(`refusing position ${event.position}`);
      if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
      const totals = this.collection<{ counterUuid: string; total: number }>("totals");
      const cur = (await totals.get(event.aggregateUuid))?.total ?? 0;
      await totals.put(event.aggregateUuid, { counterUuid: event.aggregateUuid, total: cur + p.by });
      this.applied.push(event.position);
    });
  }

  /** Resets the in-memory record with the documents: the base calls this when no live event is in flight. */
  protected override async resetState(): Promise<void> {
    this.applied = [];
    await super.resetState();
  }

  async total(counterUuid: string): Promise<number> {
    return (await this.collection<{ total: number }>("totals").get(counterUuid))?.total ?? 0;
  }

  /** Every counter's total, from the readmodel's documents. */
  async allTotals(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const d of await this.collection<{ counterUuid: string; total: number }>("totals").list({ limit: 1000 }))
      out[d.counterUuid] = d.total;
    return out;
  }
}

/** Counts every event it sees (a catch-all handler). */
export class EventCounter extends BaseReadmodel {
  seen = 0;
  constructor(facade: Facade, name = "EventCounter") {
    super(facade);
    this.domain = "Counter";
    this.name = name;
    this.addDomainEventHandler(AllEvents, () => {
      this.seen++;
    });
  }
}

/** Every stored `Incremented` event of the facade's store, in position order. */
export async function incrementEvents(f: Facade): Promise<Event[]> {
  const all: Event[] = [];
  for await (const batch of f.eventRepository.readAll({ afterPosition: 0 })) all.push(...batch.filter((e) => e.name === "Incremented"));
  return all;
}
