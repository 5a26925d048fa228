import { AsyncLocalStorage } from "node:async_hooks";
import { nowNs } from "../model/clock.js";
import type { CollectionScope, ListOptions, ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";
import {
  assertCheckpoint,
  assertCollectionMoves,
  assertCollectionName,
  assertDocumentKey,
  assertDocumentKeys,
  assertFieldName,
  assertHandlerName,
  checkScope,
  documentEntriesJson,
  documentJson,
  listWindow,
  ownerTenantOf,
  tenantKeyConflict,
  whereConditions,
  writerMayTouch,
} from "../store/readmodel-validation.js";
import { type EnsureIndexesOptions, normalizeIndexes, tenantFirstOf } from "../store/readmodel-indexes.js";
import type { StoreInfo } from "../store/store-info.js";
import { type BoundTransaction, declareBoundTransactions } from "../store/bound-transaction.js";
import { MnemeError } from "../model/errors.js";
import { AsyncMutex } from "./async-mutex.js";
import { storeClosed } from "../store/store-closed.js";
import { noteFence } from "../store/lock-fencing.js";
import { ProcessLease } from "../store/process-lease.js";

/** What checkFencingToken resolves with: nothing to wait for, the check runs at the commit. */
const NOTED: Promise<void> = Promise.resolve();

class Doc {
  #value: unknown;
  #parsed = false;

  constructor(
    /** What callers get, parsed afresh each time. */
    readonly json: string,
    /** The tenant stored with the document; null: none. */
    public tenant: string | null,
  ) {}

  /** A private parse of `json` that list/count read fields from, made when first needed (most documents are never filtered). */
  get value(): unknown {
    if (!this.#parsed) {
      this.#value = JSON.parse(this.json) as unknown;
      this.#parsed = true;
    }
    return this.#value;
  }
}

interface Coll {
  docs: Map<string, Doc>;
  /** Keys in code-unit order; dropped when a key is added or removed. */
  sortedKeys: string[] | undefined;
}

interface Tx {
  /** Inverse operations of the transaction's writes, applied backwards on rollback. */
  undo: (() => void)[];
  /** Fences noted by checkFencingToken (handler -> token), checked before the transaction commits. */
  fences: Map<string, number>;
}

/** What a collection needs from its backend; kept off the backend's public API. */
interface BackendCore {
  assertOpen(): void;
  /** The collection, or undefined when it never held a document. */
  peek(name: string): Coll | undefined;
  /** The collection, created (and the creation logged for rollback) when needed. */
  ensure(name: string): Coll;
  /** Empties a collection (clear), logging the old contents. */
  reset(name: string): void;
  /** Stores (or, with undefined, removes) one document, logging the previous one; false when there was nothing to remove. */
  setDoc(c: Coll, key: string, doc: Doc | undefined): boolean;
  /** Runs a write at once inside the running transaction or when none runs, else after the running (and queued) ones. */
  write<R>(apply: () => R): Promise<R>;
  /** Whether a write would run at once (inside the running transaction, or none runs); checks that the backend is open. */
  writesNow(): boolean;
}

/** What a bound transaction needs of its backend besides a collection's core. */
interface BoundCore {
  /** The running transaction, if any. */
  active(): Tx | undefined;
  /** Writes a checkpoint at once, logging the previous one for rollback. */
  putCheckpoint(handler: string, position: number): void;
}

/**
 * One transaction of the memory backend handed over (see BoundTransaction):
 * the collections it gives write at once while it runs, and are refused after.
 */
class MemoryBoundTransaction implements BoundTransaction, BackendCore {
  constructor(
    private readonly core: BackendCore & BoundCore,
    private readonly tx: Tx,
  ) {}

  private check(): void {
    this.core.assertOpen();
    if (this.core.active() !== this.tx)
      throw new MnemeError("INVALID_STATE", "MemoryReadmodelStoreBackend: a write through a transaction that has ended");
  }

  collection<T>(name: string, scope: CollectionScope = {}): ReadmodelCollection<T> {
    assertCollectionName(name);
    return new MemoryCollection<T>(this, name, checkScope(scope));
  }

  async setCheckpoint(handler: string, position: number): Promise<void> {
    assertHandlerName(handler);
    assertCheckpoint(position);
    this.check();
    this.core.putCheckpoint(handler, position);
  }

  checkFencingToken(handler: string, token: number): Promise<void> {
    try {
      this.check();
      noteFence(this.tx.fences, handler, token);
      return NOTED;
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }

  // BackendCore, for the collections it gives: writes run at once, in this transaction.
  assertOpen(): void {
    this.core.assertOpen();
  }
  peek(name: string): Coll | undefined {
    return this.core.peek(name);
  }
  ensure(name: string): Coll {
    return this.core.ensure(name);
  }
  reset(name: string): void {
    this.core.reset(name);
  }
  setDoc(c: Coll, key: string, doc: Doc | undefined): boolean {
    return this.core.setDoc(c, key, doc);
  }
  async write<R>(apply: () => R): Promise<R> {
    this.check();
    return apply();
  }
  writesNow(): boolean {
    this.check();
    return true;
  }
}

/**
 * The in-memory ReadmodelStoreBackend. Documents are stored as JSON (copies in,
 * copies out). Transactions are serialised by a mutex and undone from an undo
 * log when they throw; AsyncLocalStorage tells writes inside the running
 * transaction (applied at once) from writes outside it (they wait). Reads never
 * wait, so a read from outside may see a running transaction's writes.
 *
 * The processing lease (`tryLock` and the rest) is in-process (see
 * ProcessLease): this backend is one owner, as a SQLite or Postgres backend
 * object is, and every take-over gives a greater fencing token, checked
 * before a fenced transaction commits. It keeps a handler on one owner of
 * this process; processes do not share memory, so it is no single-processor
 * guarantee across them (`leaseScope: "process"`).
 */
export class MemoryReadmodelStoreBackend implements ReadmodelStoreBackend {
  /** Stores a tenant with each document and honours a collection's scope. */
  readonly tenantScopes = true;
  /** The lease holds within this process only. */
  readonly leaseScope = "process";
  private readonly lease = new ProcessLease();
  private readonly colls = new Map<string, Coll>();
  private readonly checkpoints = new Map<string, number>();
  private readonly mutex = new AsyncMutex();
  private readonly als = new AsyncLocalStorage<Tx>();
  private activeTx: Tx | undefined;
  private lastWriteAt = 0;
  private closed = false;
  private readonly core: BackendCore & BoundCore = {
    assertOpen: () => this.assertOpen(),
    peek: (name) => this.colls.get(name),
    ensure: (name) => this.ensure(name),
    reset: (name) => this.reset(name),
    setDoc: (c, key, doc) => this.setDoc(c, key, doc),
    write: (apply) => this.write(apply),
    writesNow: () => this.writesNow(),
    active: () => this.activeTx,
    putCheckpoint: (handler, position) => this.putCheckpoint(handler, position),
  };

  constructor() {
    declareBoundTransactions(this, (fn) => this.boundTransaction(fn));
  }

  async init(): Promise<void> {
    this.assertOpen();
  }

  collection<T>(name: string, scope: CollectionScope = {}): ReadmodelCollection<T> {
    assertCollectionName(name);
    return new MemoryCollection<T>(this.core, name, checkScope(scope));
  }

  /**
   * Indexed collections on the memory backend: the declaration is checked
   * (as SQLite and Postgres check it) and nothing is built; list and count
   * scan the collection as always, so results are the same as with indexes.
   */
  async ensureIndexes(collection: string, indexes: readonly (readonly string[])[], options?: EnsureIndexesOptions): Promise<void> {
    assertCollectionName(collection);
    tenantFirstOf(options);
    normalizeIndexes(indexes, collection);
    this.assertOpen();
  }

  async listCollections(): Promise<string[]> {
    this.assertOpen();
    return [...this.colls.keys()].sort();
  }

  async transaction<R>(fn: () => Promise<R>): Promise<R> {
    this.assertOpen();
    if (this.insideTx()) return fn();
    return this.runTx((tx) => this.als.run(tx, fn));
  }

  /**
   * A transaction handed to fn (see BoundTransaction): what fn writes through
   * it joins it without an async context. Inside a running `transaction(fn)`
   * (in its async context) it joins that one.
   * @internal
   */
  private boundTransaction<R>(fn: (tx: BoundTransaction) => Promise<R>): Promise<R> {
    if (this.closed) return Promise.reject(storeClosed("MemoryReadmodelStoreBackend"));
    const active = this.activeTx;
    if (active !== undefined && this.insideTx()) return fn(new MemoryBoundTransaction(this.core, active));
    return this.runTx((tx) => fn(new MemoryBoundTransaction(this.core, tx)));
  }

  /** Runs `body` as the one running transaction: serialised, the fences checked before it commits, undone when it throws. */
  private async runTx<R>(body: (tx: Tx) => Promise<R>): Promise<R> {
    const release = this.mutex.tryAcquire() ?? (await this.mutex.acquire());
    const tx: Tx = { undo: [], fences: new Map() };
    const lastWriteAt = this.lastWriteAt;
    this.activeTx = tx;
    try {
      const result = await body(tx);
      // The fence: a lease taken again (or freed) since the transaction noted it refuses the commit, all undone.
      this.lease.check(tx.fences);
      return result;
    } catch (e) {
      for (let i = tx.undo.length - 1; i >= 0; i--) (tx.undo[i] as () => void)();
      this.lastWriteAt = lastWriteAt;
      throw e;
    } finally {
      this.activeTx = undefined;
      release();
    }
  }

  /**
   * For each `[target, source]`: makes `target` hold exactly the documents
   * `source` holds and empties `source`; all at once (no read sees some done
   * and others not), joining a running transaction and undone with it. A
   * readmodel's restore from zero switches generations with it.
   */
  async replaceCollections(moves: readonly (readonly [target: string, source: string])[]): Promise<void> {
    assertCollectionMoves(moves);
    await this.write(() => {
      for (const [target, source] of moves) {
        const src = this.colls.get(source);
        const old = this.colls.get(target);
        if (src === undefined && (old === undefined || old.docs.size === 0)) continue;
        this.colls.set(target, src ?? { docs: new Map(), sortedKeys: [] });
        if (src !== undefined) this.colls.set(source, { docs: new Map(), sortedKeys: [] });
        this.lastWriteAt = nowNs();
        this.logUndo(() => {
          if (src !== undefined) this.colls.set(source, src);
          if (old === undefined) this.colls.delete(target);
          else this.colls.set(target, old);
        });
      }
    });
  }

  async getCheckpoint(handler: string): Promise<number> {
    this.assertOpen();
    return this.checkpoints.get(handler) ?? 0;
  }

  async setCheckpoint(handler: string, position: number): Promise<void> {
    assertHandlerName(handler);
    assertCheckpoint(position);
    // A live batch writes its checkpoint inside its transaction: at once, without a promise for the write.
    if (this.writesNow()) this.putCheckpoint(handler, position);
    else await this.write(() => this.putCheckpoint(handler, position));
  }

  private putCheckpoint(handler: string, position: number): void {
    const had = this.checkpoints.has(handler);
    const prev = this.checkpoints.get(handler);
    this.logUndo(() => (had ? this.checkpoints.set(handler, prev as number) : this.checkpoints.delete(handler)));
    this.checkpoints.set(handler, position);
  }

  async info(): Promise<StoreInfo> {
    this.assertOpen();
    let n = 0;
    for (const c of this.colls.values()) n += c.docs.size;
    return { storeType: "memory", numItems: n, lastItemCreatedAt: n === 0 ? 0 : this.lastWriteAt, connectionInfo: "memory" };
  }

  /** Takes the in-process lease of `handler` (always granted to this backend, the one owner; a take of a free lease gives a new token). */
  async tryLock(handler: string, holder?: string): Promise<boolean> {
    this.assertOpen();
    return this.lease.tryLock(handler, holder);
  }

  async unlock(handler: string): Promise<void> {
    this.lease.unlock(handler);
  }

  fencingToken(handler: string): number | undefined {
    return this.lease.tokenOf(handler);
  }

  /** Inside a transaction: it commits only while `token` is still the token of `handler`'s lease, taken by no one since (else INVALID_STATE, lock lost, all undone). */
  checkFencingToken(handler: string, token: number): Promise<void> {
    // Once per fenced batch: noted at once, one settled promise for every call.
    try {
      this.assertOpen();
      noteFence(this.insideTx() ? this.activeTx?.fences : undefined, handler, token);
      return NOTED;
    } catch (e) {
      return Promise.reject(e as Error);
    }
  }

  async lockHolder(handler: string): Promise<string | undefined> {
    this.assertOpen();
    return this.lease.holderOf(handler);
  }

  onLockLost(listener: (handlers: readonly string[]) => void): () => void {
    return this.lease.onLockLost(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.lease.loseAll();
  }

  private assertOpen(): void {
    if (this.closed) throw storeClosed("MemoryReadmodelStoreBackend");
  }

  private ensure(name: string): Coll {
    let c = this.colls.get(name);
    if (c === undefined) {
      c = { docs: new Map(), sortedKeys: [] };
      this.colls.set(name, c);
      this.logUndo(() => this.colls.delete(name));
    }
    return c;
  }

  private reset(name: string): void {
    const old = this.colls.get(name);
    if (old === undefined || old.docs.size === 0) return;
    this.colls.set(name, { docs: new Map(), sortedKeys: [] });
    this.logUndo(() => this.colls.set(name, old));
  }

  private setDoc(c: Coll, key: string, doc: Doc | undefined): boolean {
    const prev = c.docs.get(key);
    if (doc === undefined) {
      if (prev === undefined) return false;
      c.docs.delete(key);
      c.sortedKeys = undefined;
    } else {
      if (prev === undefined) c.sortedKeys = undefined;
      c.docs.set(key, doc);
      this.lastWriteAt = nowNs();
    }
    // `c` is the object the write went to: a clear swaps objects, and undoing in
    // reverse order puts each object back before its own writes are undone.
    this.logUndo(() => {
      if (prev === undefined) {
        if (c.docs.delete(key)) c.sortedKeys = undefined;
      } else {
        if (!c.docs.has(key)) c.sortedKeys = undefined;
        c.docs.set(key, prev);
      }
    });
    return true;
  }

  private writesNow(): boolean {
    this.assertOpen();
    return this.insideTx() || !this.mutex.locked;
  }

  private async write<R>(apply: () => R): Promise<R> {
    if (this.writesNow()) return apply();
    const release = await this.mutex.acquire();
    try {
      this.assertOpen();
      return apply();
    } finally {
      release();
    }
  }

  private insideTx(): boolean {
    const tx = this.als.getStore();
    // A stale context (a callback that outlived its transaction) counts as outside.
    return tx !== undefined && tx === this.activeTx;
  }

  private logUndo(fn: () => void): void {
    // Only writes of the running transaction are logged; outside writes run when none is active.
    this.activeTx?.undo.push(fn);
  }
}

class MemoryCollection<T> implements ReadmodelCollection<T> {
  /** The tenant this collection's writes are held to (see ownerTenantOf). */
  private readonly owner: string | undefined;

  constructor(
    private readonly backend: BackendCore,
    private readonly name: string,
    private readonly scope: CollectionScope,
  ) {
    this.owner = ownerTenantOf(scope);
  }

  /** Whether a read of this collection sees `d` (its tenant's, when the scope names one). */
  private sees(d: Doc | undefined): d is Doc {
    return d !== undefined && (this.scope.readTenantUuid === undefined || d.tenant === this.scope.readTenantUuid);
  }

  /** The document as stored: with the scope's write tenant, else ("" or none) the tenant of the one it replaces. */
  private stored(c: Coll, key: string, d: Doc): Doc {
    const write = this.scope.writeTenantUuid;
    const prev = write === undefined || write === "" ? c.docs.get(key) : undefined;
    d.tenant = prev !== undefined ? prev.tenant : (write ?? null);
    return d;
  }

  async get(key: string): Promise<T | undefined> {
    this.backend.assertOpen();
    assertDocumentKey(key);
    const d = this.backend.peek(this.name)?.docs.get(key);
    return this.sees(d) ? (JSON.parse(d.json) as T) : undefined;
  }

  async getMany(keys: readonly string[]): Promise<Map<string, T>> {
    this.backend.assertOpen();
    assertDocumentKeys(keys);
    const out = new Map<string, T>();
    const docs = this.backend.peek(this.name)?.docs;
    if (docs === undefined) return out;
    for (const k of keys) {
      const d = docs.get(k);
      if (this.sees(d)) out.set(k, JSON.parse(d.json) as T);
    }
    return out;
  }

  async put(key: string, doc: T): Promise<void> {
    const d = toDoc(documentJson(key, doc));
    await this.backend.write(() => this.putDocs([[key, d]]));
  }

  async putMany(entries: readonly (readonly [string, T])[]): Promise<void> {
    const docs = documentEntriesJson(entries).map(([k, json]) => [k, toDoc(json)] as const);
    if (docs.length === 0) return;
    // A readmodel's batch writes inside its transaction: at once, without a promise for the write.
    if (this.backend.writesNow()) this.putDocs(docs);
    else await this.backend.write(() => this.putDocs(docs));
  }

  private putDocs(docs: readonly (readonly [string, Doc])[]): void {
    const c = this.backend.ensure(this.name);
    this.assertMayReplace(c, docs);
    for (const [k, d] of docs) this.backend.setDoc(c, k, this.stored(c, k, d));
  }

  /** CONFLICT, before anything is written, when a key of `docs` holds another tenant's document. */
  private assertMayReplace(c: Coll, docs: readonly (readonly [string, Doc])[]): void {
    if (this.owner === undefined) return;
    let taken: Set<string> | undefined;
    for (const [k] of docs) if (!this.mayTouch(c.docs.get(k))) (taken ??= new Set()).add(k);
    if (taken !== undefined) throw tenantKeyConflict(this.name, [...taken]);
  }

  /** Whether this collection's writer may replace or delete `d` (not another tenant's). */
  private mayTouch(d: Doc | undefined): boolean {
    return d === undefined || writerMayTouch(this.owner, d.tenant);
  }

  /** Deletes `key` unless it holds another tenant's document (then, as for an absent one, false). */
  private deleteDoc(c: Coll, key: string): boolean {
    return this.mayTouch(c.docs.get(key)) && this.backend.setDoc(c, key, undefined);
  }

  async delete(key: string): Promise<boolean> {
    assertDocumentKey(key);
    return this.backend.write(() => {
      const c = this.backend.peek(this.name);
      return c === undefined ? false : this.deleteDoc(c, key);
    });
  }

  async deleteMany(keys: readonly string[]): Promise<number> {
    assertDocumentKeys(keys, "deleteMany");
    return this.backend.write(() => {
      const c = this.backend.peek(this.name);
      let deleted = 0;
      if (c !== undefined) for (const key of keys) if (this.deleteDoc(c, key)) deleted++;
      return deleted;
    });
  }

  async list(opts: ListOptions = {}): Promise<T[]> {
    this.backend.assertOpen();
    const { offset, limit } = listWindow(opts);
    const orderBy = opts.orderBy;
    if (orderBy !== undefined) assertFieldName(orderBy, "orderBy");
    const match = this.matcher(opts.where);
    const c = this.backend.peek(this.name);
    if (c === undefined) return [];

    let keys: string[];
    if (orderBy === undefined) {
      c.sortedKeys ??= [...c.docs.keys()].sort();
      keys = match === undefined ? c.sortedKeys : c.sortedKeys.filter((k) => match(c.docs.get(k) as Doc));
      if (opts.descending === true) keys = keys.slice().reverse();
    } else {
      const rows: { key: string; v: unknown }[] = [];
      for (const [key, d] of c.docs) {
        if (match !== undefined && !match(d)) continue;
        rows.push({ key, v: fieldOf(d.value, orderBy) });
      }
      const dir = opts.descending === true ? -1 : 1;
      rows.sort((a, b) => dir * (compareValues(a.v, b.v) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)));
      keys = rows.map((r) => r.key);
    }
    const end = limit === undefined ? keys.length : offset + limit;
    return keys.slice(offset, end).map((k) => JSON.parse((c.docs.get(k) as Doc).json) as T);
  }

  async count(where?: ListOptions["where"]): Promise<number> {
    this.backend.assertOpen();
    const match = this.matcher(where);
    const c = this.backend.peek(this.name);
    if (c === undefined) return 0;
    if (match === undefined) return c.docs.size;
    let n = 0;
    for (const d of c.docs.values()) if (match(d)) n++;
    return n;
  }

  /** The filter of `where` and of the scope's tenant; undefined when there is none. */
  private matcher(where: ListOptions["where"]): ((d: Doc) => boolean) | undefined {
    const fields = matcher(where);
    const tenant = this.scope.readTenantUuid;
    if (tenant === undefined) return fields === undefined ? undefined : (d) => fields(d.value);
    return (d) => d.tenant === tenant && (fields === undefined || fields(d.value));
  }

  /** Empties the collection; a writer with a tenant empties only that tenant's documents. */
  async clear(): Promise<void> {
    const owner = this.owner;
    await this.backend.write(() => {
      if (owner === undefined) {
        this.backend.reset(this.name);
        return;
      }
      const c = this.backend.peek(this.name);
      if (c !== undefined) for (const [key, d] of [...c.docs]) if (d.tenant === owner) this.backend.setDoc(c, key, undefined);
    });
  }
}

function toDoc(json: string): Doc {
  return new Doc(json, null);
}

function matcher(where: ListOptions["where"]): ((doc: unknown) => boolean) | undefined {
  const conds = whereConditions(where);
  if (conds.length === 0) return undefined;
  // Strict equality: 1 matches neither "1" nor true, as in the SQL backends.
  return (doc) => conds.every(([f, v]) => fieldOf(doc, f) === v);
}

function fieldOf(doc: unknown, field: string): unknown {
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return undefined;
  return Object.prototype.hasOwnProperty.call(doc, field) ? (doc as Record<string, unknown>)[field] : undefined;
}

/** Missing/null < booleans < numbers < strings < objects and arrays (by JSON). */
function rank(v: unknown): number {
  if (v === undefined || v === null) return 0;
  switch (typeof v) {
    case "boolean":
      return 1;
    case "number":
      return 2;
    case "string":
      return 3;
    default:
      return 4;
  }
}

function compareValues(a: unknown, b: unknown): number {
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  if (ra === 0) return 0;
  if (ra === 4) {
    const ja = JSON.stringify(a);
    const jb = JSON.stringify(b);
    return ja < jb ? -1 : ja > jb ? 1 : 0;
  }
  const x = a as number | string | boolean;
  const y = b as number | string | boolean;
  return x < y ? -1 : x > y ? 1 : 0;
}
