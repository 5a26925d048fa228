/**
 * The stores of a facade and the guarantees they keep: `createFacade` takes a
 * whole engine (`backend`), single stores (picked one by one, or spread from
 * an engine factory: deprecated), or both, and refuses a mix that loses a
 * guarantee one of the given stores' engines gives, unless the application
 * accepts losing it (`acceptLostGuarantees`). What each store offers is its
 * engine's declaration; a store of your own, made outside an engine, is read
 * once when composed (see `readmodelBackendCapabilities` and its siblings),
 * and the readmodel runner uses its lease or, without one, an in-process
 * lease (`leasedBackend`), so nothing downstream asks which methods it has.
 */
import { MnemeError } from "../model/errors.js";
import { MemoryCommandStore } from "../memory/memory-command-store.js";
import { MemoryEventRepository } from "../memory/memory-event-repository.js";
import { MemoryReadmodelStoreBackend } from "../memory/memory-readmodel-store-backend.js";
import {
  engineOf,
  GUARANTEE_NAMES,
  GUARANTEES,
  guaranteesOf,
  guaranteesOffered,
  type Engine,
  type Guarantee,
  type GuaranteeStore,
  type GuaranteeStores,
} from "../store/backend.js";
import type { CacheStore } from "../store/cache-store.js";
import type { CommandStore } from "../store/command-store.js";
import type { DataStore } from "../store/data-store.js";
import type { EventRepository } from "../store/event-repository.js";
import type { KeyStore } from "../store/key-store.js";
import type { LogStore } from "../store/log-store.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import type { SnapshotStore } from "../store/snapshot-store.js";

/** The options of `createFacade` that choose its stores. */
export interface BackendChoice {
  /**
   * A whole engine (`createSqliteBackends(...)`, `createPostgresBackends(...)`,
   * `createMemoryBackends()`): every store it has, unless a store option below
   * names another one; `facade.stop()` closes it. The way to give stores:
   * spreading an engine into the options (`...createSqliteBackends(...)`) is
   * deprecated and goes in the next major release.
   */
  readonly backend?: Engine;
  /**
   * Guarantees the application accepts to lose by mixing stores (see
   * {@link Guarantee}): without them in this list, `createFacade` refuses a mix
   * that keeps less than the backends of the given stores guarantee.
   * @example createFacade({ backend: createPostgresBackends(pg), readmodelStoreBackend: mine, acceptLostGuarantees: ["blue-green-rebuild"] })
   */
  readonly acceptLostGuarantees?: readonly Guarantee[];
  /** The event store. Default: in memory, as every store not given. */
  readonly eventRepository?: EventRepository;
  readonly commandStore?: CommandStore;
  readonly dataStore?: DataStore;
  readonly cacheStore?: CacheStore;
  readonly logStore?: LogStore;
  /** Default backend of readmodels that set none (and of plain handlers' checkpoints). */
  readonly readmodelStoreBackend?: ReadmodelStoreBackend;
  /** Snapshots of aggregates that set `snapshotEvery` (createSqliteBackends / createPostgresBackends give one in the events' database). */
  readonly snapshotStore?: SnapshotStore;
  /**
   * The keys of personal data (`Domain.event(name, { personalData })`, see docs/privacy.md):
   * createSqliteBackends / createPostgresBackends give one beside the events. The in-memory
   * default serves only the in-memory event repository.
   */
  readonly keyStore?: KeyStore;
  /** Extra cleanup run by stop() after the stores are closed (e.g. `close` of createSqliteBackends). */
  readonly close?: () => Promise<void> | void;
}

const ROLES: readonly GuaranteeStore[] = ["eventRepository", "commandStore", "readmodelStoreBackend"];
const BACKEND_STORES = [...ROLES, "dataStore", "cacheStore", "logStore", "snapshotStore", "keyStore"] as const;

/**
 * Checks the stores `options` choose and returns the options with the
 * backend's stores filled in where no store option names one (and its
 * `close` run by `stop()`). INVALID_REQUEST naming each guarantee lost and
 * the store responsible, unless `acceptLostGuarantees` lists it.
 */
export function chooseStores<O extends BackendChoice>(options: O): O {
  const accepted = acceptedLosses(options.acceptLostGuarantees);
  const chosen = withBackend(options);
  const lost = lostGuarantees(chosen).filter((l) => !accepted.has(l.guarantee));
  if (lost.length > 0) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `createFacade: these stores lose ${lost.length === 1 ? "a guarantee" : "guarantees"} that their backends give: ${lost
        .map((l) => `${l.guarantee} (${l.why}: ${GUARANTEES[l.guarantee].without})`)
        .join("; ")}. Give stores of one backend, or accept the loss with acceptLostGuarantees: ${JSON.stringify(
        lost.map((l) => l.guarantee),
      )}`,
      { details: lost.map((l) => ({ pointer: `/${l.store}`, message: l.why, guarantee: l.guarantee, store: l.store })) },
    );
  }
  return chosen;
}

function acceptedLosses(given: unknown): Set<Guarantee> {
  if (given === undefined) return new Set();
  if (!Array.isArray(given) || given.some((g) => !GUARANTEE_NAMES.includes(g as Guarantee))) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `createFacade: acceptLostGuarantees must be an array of ${GUARANTEE_NAMES.map((g) => JSON.stringify(g)).join(", ")}; got ${JSON.stringify(given)}`,
    );
  }
  return new Set(given as Guarantee[]);
}

/** `options` with the stores of `options.backend` where no store option names one. */
function withBackend<O extends BackendChoice>(options: O): O {
  const backend = options.backend;
  if (backend === undefined) return options;
  if (typeof backend !== "object" || backend === null || !Array.isArray(backend.guarantees) || typeof backend.close !== "function") {
    throw new MnemeError(
      "INVALID_REQUEST",
      "createFacade: backend must be a backend object, an engine (createSqliteBackends, createPostgresBackends, createMemoryBackends, defineEngine, defineBackend)",
    );
  }
  const out: Record<string, unknown> = { ...(options as object) };
  for (const name of BACKEND_STORES) {
    if (out[name] === undefined && backend[name] !== undefined) out[name] = backend[name];
  }
  const own = options.close;
  out.close =
    own === undefined
      ? () => backend.close()
      : async () => {
          try {
            await own();
          } finally {
            await backend.close();
          }
        };
  return out as O;
}

/** A guarantee a given store's backend gives and the chosen stores do not, with the store responsible. */
interface LostGuarantee {
  readonly guarantee: Guarantee;
  readonly store: GuaranteeStore;
  readonly why: string;
}

/**
 * What the chosen stores would lose: every guarantee a given store's backend
 * gives (or, for a store made outside a backend factory, the store offers on
 * its own side) that the stores do not give together (absent stores are the
 * in-memory defaults).
 */
function lostGuarantees(options: BackendChoice): LostGuarantee[] {
  const expected = new Map<Guarantee, string>();
  for (const guarantee of options.backend?.guarantees ?? []) expected.set(guarantee, "the backend given");
  for (const role of ROLES) {
    const store = options[role];
    if (store === undefined) continue;
    const backend = engineOf(store);
    const source = backend === undefined ? `${role} (${className(store)})` : `the backend of ${role} (${className(store)})`;
    for (const guarantee of backend?.guarantees ?? guaranteesOffered(role, store)) {
      if (!expected.has(guarantee)) expected.set(guarantee, source);
    }
  }
  if (expected.size === 0) return [];
  const stores: GuaranteeStores = {
    eventRepository: options.eventRepository ?? new MemoryEventRepository(),
    commandStore: options.commandStore ?? new MemoryCommandStore(),
    readmodelStoreBackend: options.readmodelStoreBackend ?? new MemoryReadmodelStoreBackend(),
  };
  const held = new Set(guaranteesOf(stores));
  const lost: LostGuarantee[] = [];
  for (const [guarantee, source] of expected) {
    if (held.has(guarantee)) continue;
    const store = responsible(guarantee, stores);
    const lacking =
      guarantee === "atomic-command-record" && store === "commandStore" ? "is not in the event repository's database" : "does not give it";
    lost.push({ guarantee, store, why: `${source} gives it; ${describe(options, stores, store)} ${lacking}` });
  }
  return lost;
}

/** The store whose side a lost guarantee lacks: the event repository when it cannot join any command store, else the guarantee's store. */
function responsible(guarantee: Guarantee, stores: GuaranteeStores): GuaranteeStore {
  if (guarantee === "atomic-command-record" && !guaranteesOffered("eventRepository", stores.eventRepository).includes(guarantee)) {
    return "eventRepository";
  }
  return GUARANTEES[guarantee].store;
}

/** How a store is named in the error: its option and class, and whether it is the in-memory default. */
function describe(options: BackendChoice, stores: GuaranteeStores, role: GuaranteeStore): string {
  return `${role} (${className(stores[role])}${options[role] === undefined ? ", the default" : ""})`;
}

function className(store: object): string {
  return (store as { constructor?: { name?: string } }).constructor?.name || "an object";
}
