/**
 * A readmodel for partition tests and the partitions bench: per counter, the
 * positions and versions of every Incremented event applied, in the order
 * applied, kept in the shared documents. An event applied twice or out of
 * its aggregate's order shows in them, whichever instance applied it.
 */
import { BaseReadmodel, type Event, type Facade, type ReadmodelOption } from "mneme";
import { Incremented } from "./counter-domain.js";

export interface LogDoc {
  counterUuid: string;
  total: number;
  positions: number[];
  versions: number[];
}

export class PartitionedLog extends BaseReadmodel {
  /** Busy work per event (microseconds of CPU), for the bench. */
  workMicros = 0;

  constructor(facade: Pick<Facade, "eventRepository" | "readmodelStoreBackend">, name = "PartitionedLog", ...options: ReadmodelOption[]) {
    super(facade, ...options);
    this.domain = "Counter";
    this.name = name;
    this.addDomainEventHandler(Incremented, async (_ctx, e, p) => {
      if (this.workMicros > 0) busy(this.workMicros);
      const log = this.collection<LogDoc>("log");
      const d = (await log.get(e.aggregateUuid)) ?? { counterUuid: e.aggregateUuid, total: 0, positions: [], versions: [] };
      d.total += p.by;
      d.positions.push(e.position);
      d.versions.push(e.version);
      await log.put(e.aggregateUuid, d);
    });
  }

  async docs(): Promise<Map<string, LogDoc>> {
    const out = new Map<string, LogDoc>();
    for (const d of await this.collection<LogDoc>("log").list({ limit: 100_000 })) out.set(d.counterUuid, d);
    return out;
  }
}

/** Spins the CPU for `micros` microseconds (a CPU-bound projection's work). */
export function busy(micros: number): void {
  const end = performance.now() + micros / 1000;
  while (performance.now() < end) {
    /* spin */
  }
}

/**
 * What the documents must be: for every counter, the positions and versions
 * of its Incremented events in the store, in order (a replay from zero).
 */
export async function expectedDocs(facade: Pick<Facade, "eventRepository">): Promise<Map<string, LogDoc>> {
  const out = new Map<string, LogDoc>();
  for await (const batch of facade.eventRepository.readAll({ batchSize: 1000 })) {
    for (const e of batch as Event<{ by: number }>[]) {
      if (e.name !== "Incremented") continue;
      const d = out.get(e.aggregateUuid) ?? { counterUuid: e.aggregateUuid, total: 0, positions: [], versions: [] };
      d.total += e.payload.by;
      d.positions.push(e.position);
      d.versions.push(e.version);
      out.set(e.aggregateUuid, d);
    }
  }
  return out;
}

/**
 * A CPU-bound readmodel for the partitions bench: ~`workMicros` of CPU per
 * event, totals per counter read once per batch (getMany) and written once
 * per batch (putMany), so the database costs little next to the work.
 */
export class CpuTotals extends BaseReadmodel {
  workMicros = 50;
  #batch = new Map<string, { counterUuid: string; total: number }>();
  #dirty = new Set<string>();

  constructor(facade: Pick<Facade, "eventRepository" | "readmodelStoreBackend">, name = "PartitionedLog", ...options: ReadmodelOption[]) {
    super(facade, ...options);
    this.domain = "Counter";
    this.name = name;
    this.addDomainEventHandler(Incremented, (_ctx, e, p) => {
      busy(this.workMicros);
      const d = this.#batch.get(e.aggregateUuid) ?? { counterUuid: e.aggregateUuid, total: 0 };
      d.total += p.by;
      this.#batch.set(e.aggregateUuid, d);
      this.#dirty.add(e.aggregateUuid);
    });
  }

  protected override async beforeBatch(events: readonly Event[]): Promise<void> {
    const keys = [...new Set(events.map((e) => e.aggregateUuid))];
    this.#batch = await this.collection<{ counterUuid: string; total: number }>("totals").getMany(keys);
    this.#dirty.clear();
  }

  protected override async afterBatch(): Promise<void> {
    const entries = [...this.#dirty].map((k) => [k, this.#batch.get(k)!] as const);
    if (entries.length > 0) await this.collection<{ counterUuid: string; total: number }>("totals").putMany(entries);
    this.#dirty.clear();
  }

  protected override discardBatch(): void {
    this.#dirty.clear();
  }
}
