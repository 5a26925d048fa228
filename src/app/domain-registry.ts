/**
 * The registered domains: their commands, queries and event types by name,
 * the tenancy of their events, and the evolve keys that name another
 * domain's events (checked once every domain is registered, at start).
 */
import type { InstalledDomain } from "../model/domain-install.js";
import { MnemeError } from "../model/errors.js";
import type { AggregateType, CommandType, EventType, QueryType } from "../model/tokens.js";
import type { MessageRef } from "../model/facade-handle.js";
import { EventTenancy } from "./tenancy.js";

/** An evolve key naming an event of another domain. */
interface PendingEvolveKey {
  aggregate: AggregateType<any>;
  key: string;
}

export class DomainRegistry {
  readonly domains = new Map<string, InstalledDomain>();
  readonly eventTypes = new Map<string, EventType>();
  readonly tenancy = new EventTenancy();
  /** Evolve keys naming another domain's events, checked once every domain is registered (at start). */
  readonly #pendingEvolveKeys: PendingEvolveKey[] = [];

  /** INVALID_DOMAIN for a second domain of the name. */
  assertNew(name: string): void {
    if (this.domains.has(name)) throw new MnemeError("INVALID_DOMAIN", `a domain named ${name} is registered already`);
  }

  /**
   * Rejects evolve keys that name no event (a typo such as `Opend` would
   * otherwise never fire). Keys of this domain are checked now; keys naming
   * a domain not registered yet are returned, to be checked at start().
   */
  checkEvolveKeys(domain: InstalledDomain): PendingEvolveKey[] {
    const deferred: PendingEvolveKey[] = [];
    for (const a of domain.aggregates.values()) {
      for (const key of Object.keys(a.evolve)) {
        const dot = key.indexOf(".");
        const owner = dot < 0 ? domain.name : key.slice(0, dot);
        const name = dot < 0 ? key : key.slice(dot + 1);
        const events = owner === domain.name ? domain.events : this.domains.get(owner)?.events;
        if (events === undefined) deferred.push({ aggregate: a, key });
        else if (!events.has(name)) throw unknownEvolveKey(a, key, owner, events);
      }
    }
    return deferred;
  }

  /** Adds a checked domain (its evolve keys naming domains not registered yet in `deferred`). */
  add(domain: InstalledDomain, deferred: readonly PendingEvolveKey[]): void {
    for (const t of domain.events.values()) this.eventTypes.set(t.path, t);
    for (const a of domain.aggregates.values()) this.tenancy.addAggregate(a);
    this.#pendingEvolveKeys.push(...deferred);
    this.domains.set(domain.name, domain);
  }

  /** At start: every evolve key naming another domain names one of its events (INVALID_DOMAIN). */
  checkPendingEvolveKeys(): void {
    for (const { aggregate, key } of this.#pendingEvolveKeys) {
      const dot = key.indexOf(".");
      const owner = key.slice(0, dot);
      const events = this.domains.get(owner)?.events;
      if (events === undefined || !events.has(key.slice(dot + 1))) throw unknownEvolveKey(aggregate, key, owner, events);
    }
  }

  /** The command type registered under (domain, name). UNKNOWN_COMMAND otherwise. */
  resolveCommand(ref: CommandType<any, any> | MessageRef): CommandType<any, any> {
    const t = this.domains.get(ref?.domain)?.commands.get(ref?.name);
    if (t === undefined) throw new MnemeError("UNKNOWN_COMMAND", `unknown command ${String(ref?.domain)}.${String(ref?.name)}`);
    return t;
  }

  /** The query type registered under (domain, name). UNKNOWN_QUERY otherwise. */
  resolveQuery(ref: QueryType<any, any> | MessageRef): QueryType<any, any> {
    const t = this.domains.get(ref?.domain)?.queries.get(ref?.name);
    if (t === undefined) throw new MnemeError("UNKNOWN_QUERY", `unknown query ${String(ref?.domain)}.${String(ref?.name)}`);
    return t;
  }
}

function unknownEvolveKey(
  aggregate: AggregateType<any>,
  key: string,
  owner: string,
  events: ReadonlyMap<string, EventType> | undefined,
): MnemeError {
  const known =
    events === undefined ? `no domain ${owner} is registered` : `known events of ${owner}: ${[...events.keys()].join(", ") || "none"}`;
  return new MnemeError(
    "INVALID_DOMAIN",
    `aggregate ${aggregate.domain}.${aggregate.name}: evolve key ${JSON.stringify(key)} names no event (${known})`,
  );
}
