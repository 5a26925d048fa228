import type { CollectionScope, ReadmodelCollection, ReadmodelStoreBackend } from "./readmodel-store-backend.js";

/**
 * A readmodel backend's transaction handed to its caller explicitly: the
 * collections it gives write into that transaction and no other, whatever
 * async context they are called from: the backend needs no async context to
 * tell which writes are the transaction's. What `collection` gives is valid
 * while the transaction runs; a write through it after the end is refused
 * (INVALID_STATE). Writes made through the backend itself (not through the
 * transaction) count as from outside: they wait for the transaction to end,
 * so code inside it must write through the transaction only.
 * @internal
 */
export interface BoundTransaction {
  /** The documents of one collection, in this transaction. */
  collection<T>(name: string, scope?: CollectionScope): ReadmodelCollection<T>;
  /** As the backend's setCheckpoint, in this transaction. */
  setCheckpoint(handler: string, position: number): Promise<void>;
  /** As the backend's checkFencingToken, for this transaction: it commits only while `token` is still `handler`'s. */
  checkFencingToken(handler: string, token: number): Promise<void>;
}

/**
 * A backend that can run a transaction handed to fn explicitly: as
 * `transaction(fn)` (serialised with the other transactions, rolled back when
 * fn throws), with the transaction as fn's argument.
 * @internal
 */
export type BoundTransactions = <R>(fn: (tx: BoundTransaction) => Promise<R>) => Promise<R>;

const declared = new WeakMap<ReadmodelStoreBackend, BoundTransactions>();

/** A backend declares (in its constructor) that it runs bound transactions so. @internal */
export function declareBoundTransactions(backend: ReadmodelStoreBackend, run: BoundTransactions): void {
  declared.set(backend, run);
}

/** How `backend` runs a bound transaction, or undefined when it declared none. @internal */
export function boundTransactionsOf(backend: ReadmodelStoreBackend): BoundTransactions | undefined {
  return declared.get(backend);
}
