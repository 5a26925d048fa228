/**
 * The tenancy rule on the write path: the tenant of a request, and which
 * aggregates of a command are global (exempt from the rule that an aggregate
 * keeps the tenant of its first event).
 */
import { MnemeError } from "../model/errors.js";
import type { AggregateTenancy, AggregateType } from "../model/tokens.js";
import type { CommandAggregates } from "./command-aggregates.js";

export { tenantOf } from "../model/effective-tenant.js";

export function aggregateNotFound(aggregate: AggregateType<any>, aggregateUuid: string): MnemeError {
  // The same words whether the aggregate is absent or lives in another tenant: no existence oracle.
  return new MnemeError("NOT_FOUND", `${aggregate.domain}.${aggregate.name} ${aggregateUuid} was not found`);
}

/** Per event path, whether only global aggregates evolve it (then its aggregates are exempt from the tenant rule). */
export class EventTenancy {
  /** Event path -> "global" when only global aggregates evolve it. */
  readonly #byPath = new Map<string, AggregateTenancy>();

  /** Notes the events an aggregate evolves. */
  addAggregate(a: AggregateType<any>): void {
    for (const key of Object.keys(a.evolve)) {
      const path = key.includes(".") ? key : `${a.domain}.${key}`;
      // One tenant-scoped aggregate evolving an event keeps the rule on for it.
      if (a.tenancy === "tenant") this.#byPath.set(path, "tenant");
      else if (!this.#byPath.has(path)) this.#byPath.set(path, "global");
    }
  }

  /** True when only global aggregates evolve the event path. */
  isGlobal(path: string): boolean {
    return this.#byPath.get(path) === "global";
  }
}

/**
 * The aggregates of a command that are global: loaded as a global aggregate in
 * this command, or (not loaded) every event of it is evolved by global
 * aggregates only (`scopedByEvent` holds the others).
 */
export function globalAggregates(
  aggregates: Iterable<string>,
  loader: CommandAggregates | undefined,
  scopedByEvent: ReadonlySet<string> | undefined,
): string[] | undefined {
  let globals: string[] | undefined;
  for (const agg of aggregates) {
    const loadedTenancy = loader?.loadedTenancy(agg);
    if (loadedTenancy === "global" || (loadedTenancy === undefined && scopedByEvent?.has(agg) !== true)) (globals ??= []).push(agg);
  }
  return globals;
}
