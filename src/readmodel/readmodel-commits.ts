import type { Event } from "../model/types.js";

/** A batch a readmodel (or any event handler) committed with its checkpoint. */
export interface ReadmodelBatch {
  readonly eventHandlerName: string;
  /** The tenants of the batch's events ("" for events without a tenant). */
  readonly tenantUuids: ReadonlySet<string>;
  /** The position the handler's checkpoint moved to. */
  readonly position: number;
  /** True when the batch was part of a restoration (a replay from the checkpoint or from zero). */
  readonly restoring: boolean;
}

/** Told after each committed batch, on the instance that committed it. */
export type ReadmodelBatchListener = (batch: ReadmodelBatch) => void;

/**
 * Tells listeners (live queries) that a handler committed a batch. A listener
 * that throws is ignored: it must not fail the handler's delivery, whose batch
 * has committed already.
 */
export class ReadmodelCommits {
  readonly #listeners = new Set<ReadmodelBatchListener>();

  /** Adds a listener; returns the function that removes it. */
  listen(listener: ReadmodelBatchListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** True while someone listens: a runner skips building the batch's summary otherwise. */
  get active(): boolean {
    return this.#listeners.size > 0;
  }

  /** Called by the runner after the batch's transaction committed. */
  committed(eventHandlerName: string, events: readonly Event[], restoring: boolean): void {
    if (this.#listeners.size === 0 || events.length === 0) return;
    const tenantUuids = new Set<string>();
    for (const e of events) tenantUuids.add(e.tenantUuid);
    const batch: ReadmodelBatch = { eventHandlerName, tenantUuids, position: events[events.length - 1]!.position, restoring };
    for (const l of [...this.#listeners]) {
      try {
        l(batch);
      } catch {
        // A listener's failure is its own (it reports it on its own channel); delivery goes on.
      }
    }
  }
}
