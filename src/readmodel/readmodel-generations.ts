import { readmodelBackendCapabilities } from "../store/backend.js";
import type { ListOptions, ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import { assertDocumentKeys } from "../store/readmodel-validation.js";
import { buildingNextGeneration, collectionInScope } from "./tenant-scope.js";

/**
 * Blue-green generations of a readmodel's documents. The served generation
 * lives in the backend's collections `<name>:<collection>` under the
 * checkpoint `<name>`; a restore from zero builds the next one beside it, in
 * `<name>#rebuild:<collection>` under the checkpoint `<name>#rebuild`, and
 * replaces the served collections with it in one backend transaction when it
 * is complete. Which generation `collection()` reaches is decided per call by
 * the batch's context (tenant-scope.ts): the runner applies the rebuild's
 * batches in a context that builds the next generation (`inReadmodelBatch`),
 * everything else (queries, live delivery) reaches the served one.
 * @internal
 */

/** Suffix of the next generation's checkpoint and collection prefix. */
const NEXT = "#rebuild";

/** The checkpoint key of the generation being built for `readmodel`. */
export function nextGenerationCheckpoint(readmodel: string): string {
  return `${readmodel}${NEXT}`;
}

/** The collection prefix of the served generation. */
export function servedPrefix(readmodel: string): string {
  return `${readmodel}:`;
}

/** The collection prefix of the generation being built. */
export function nextPrefix(readmodel: string): string {
  return `${readmodel}${NEXT}:`;
}

/** The collection prefix `readmodel`'s collections resolve to in the current async context. */
export function currentPrefix(readmodel: string): string {
  return buildingNextGeneration(readmodel) ? nextPrefix(readmodel) : servedPrefix(readmodel);
}

/**
 * The optional backend capability the switch uses: for each `[target,
 * source]`, makes `target` hold exactly the documents of `source` and empties
 * `source`, all as one write that joins a running transaction (memory, SQLite
 * and Postgres have it). A backend without it restores from zero in place
 * (readers may see the rebuild in progress).
 */
export interface CollectionReplacing {
  replaceCollections(moves: readonly (readonly [target: string, source: string])[]): Promise<void>;
}

/** Whether `backend` can switch generations (its capabilities say `replaceCollections`). */
export function supportsGenerations(backend: ReadmodelStoreBackend): backend is ReadmodelStoreBackend & CollectionReplacing {
  return readmodelBackendCapabilities(backend).replaceCollections;
}

/**
 * The switch (inside the caller's transaction), as one write: every served
 * collection is replaced by its counterpart of the next generation (empty
 * when the next generation has none), and the next generation is left empty.
 */
export async function switchGenerations(backend: ReadmodelStoreBackend & CollectionReplacing, readmodel: string): Promise<void> {
  const served = servedPrefix(readmodel);
  const next = nextPrefix(readmodel);
  const names = new Set<string>();
  for (const n of await backend.listCollections()) {
    if (n.startsWith(next)) names.add(n.slice(next.length));
    else if (n.startsWith(served)) names.add(n.slice(served.length));
  }
  const moves = [...names].sort().map((rest) => [served + rest, next + rest] as const);
  if (moves.length > 0) await backend.replaceCollections(moves);
  await participantOf(backend, readmodel)?.switchGeneration();
}

/** Empties every collection of the next generation (inside the caller's transaction). */
export async function clearNextGeneration(backend: ReadmodelStoreBackend, readmodel: string): Promise<void> {
  const next = nextPrefix(readmodel);
  for (const n of await backend.listCollections()) if (n.startsWith(next)) await backend.collection(n).clear();
  await participantOf(backend, readmodel)?.discardNextGeneration();
}

/**
 * Generational state of a readmodel kept outside its collections (a SQL-table
 * readmodel's tables): told, inside the same transaction, when the next
 * generation replaces the served one and when it is discarded.
 */
export interface GenerationParticipant {
  switchGeneration(): Promise<void>;
  discardNextGeneration(): Promise<void>;
}

const participants = new WeakMap<ReadmodelStoreBackend, Map<string, GenerationParticipant>>();

/** Makes `participant` take part in the switches and discards of `readmodel`'s generations on `backend`. */
export function addGenerationParticipant(backend: ReadmodelStoreBackend, readmodel: string, participant: GenerationParticipant): void {
  let byName = participants.get(backend);
  if (byName === undefined) participants.set(backend, (byName = new Map()));
  byName.set(readmodel, participant);
}

function participantOf(backend: ReadmodelStoreBackend, readmodel: string): GenerationParticipant | undefined {
  return participants.get(backend)?.get(readmodel);
}

/** Whether a collection's documents belong to tenants (the default) or are shared by all. */
export type CollectionTenancy = "tenant" | "global";

/** The indexes declared for a collection (normalised), and whether the tenant leads them (a tenant-scoped declaration). */
export interface DeclaredIndexes {
  readonly fields: readonly (readonly string[])[];
  readonly tenantFirst: boolean;
}

/**
 * A readmodel's collection that resolves, per call, to the served generation
 * or (in a rebuild's batch) to the one being built, and, for a
 * tenant-scoped collection, to the tenant scope of the async context.
 */
export class GenerationalCollection<T> implements ReadmodelCollection<T> {
  readonly #backend: () => ReadmodelStoreBackend;
  readonly #readmodel: string;
  readonly #name: string;
  readonly #tenancy: CollectionTenancy;
  readonly #indexes: DeclaredIndexes | undefined;

  /** `indexes`: the declared indexes, made sure of in the generation reached before each call; undefined: none declared. */
  constructor(
    backend: () => ReadmodelStoreBackend,
    readmodel: string,
    name: string,
    tenancy: CollectionTenancy = "tenant",
    indexes?: DeclaredIndexes,
  ) {
    this.#backend = backend;
    this.#readmodel = readmodel;
    this.#name = name;
    this.#tenancy = tenancy;
    this.#indexes = indexes;
  }

  #target(backend: ReadmodelStoreBackend, name: string): ReadmodelCollection<T> {
    return this.#tenancy === "global" ? backend.collection<T>(name) : collectionInScope<T>(backend, name, this.#readmodel);
  }

  /**
   * Runs `op` on the collection of the generation and tenant scope of the
   * current async context; with declared indexes, after making sure that
   * generation's collection has them (a no-op once done: the backend
   * remembers), so the next generation of a rebuild gets its indexes with
   * its first write, before the switch.
   */
  #run<R>(op: (c: ReadmodelCollection<T>) => Promise<R>): Promise<R> {
    const backend = this.#backend();
    const name = currentPrefix(this.#readmodel) + this.#name;
    const target = this.#target(backend, name);
    const indexes = this.#indexes;
    if (indexes === undefined || !readmodelBackendCapabilities(backend).indexes) return op(target);
    return backend.ensureIndexes!(name, indexes.fields, { tenantFirst: indexes.tenantFirst }).then(() => op(target));
  }

  get(key: string): Promise<T | undefined> {
    return this.#run((c) => c.get(key));
  }
  getMany(keys: readonly string[]): Promise<Map<string, T>> {
    return this.#run((c) => c.getMany(keys));
  }
  put(key: string, doc: T): Promise<void> {
    return this.#run((c) => c.put(key, doc));
  }
  putMany(entries: readonly (readonly [string, T])[]): Promise<void> {
    return this.#run((c) => c.putMany(entries));
  }
  delete(key: string): Promise<boolean> {
    return this.#run((c) => c.delete(key));
  }
  /** The backend's `deleteMany` in one statement, or (a backend without it) the keys checked, then deleted one by one. */
  deleteMany(keys: readonly string[]): Promise<number> {
    return this.#run((c) => deleteKeys(c, keys));
  }
  list(opts?: ListOptions): Promise<T[]> {
    return this.#run((c) => c.list(opts));
  }
  count(where?: ListOptions["where"]): Promise<number> {
    return this.#run((c) => c.count(where));
  }
  clear(): Promise<void> {
    return this.#run((c) => c.clear());
  }
}

/**
 * Deletes `keys` from `c`: with its `deleteMany` (one statement), or where the
 * backend has none, every key checked first and then deleted one by one.
 * Resolves how many documents were there.
 * @internal
 */
export async function deleteKeys<T>(c: ReadmodelCollection<T>, keys: readonly string[]): Promise<number> {
  if (c.deleteMany !== undefined) return c.deleteMany(keys);
  assertDocumentKeys(keys, "deleteMany");
  let deleted = 0;
  for (const key of keys) if (await c.delete(key)) deleted++;
  return deleted;
}
