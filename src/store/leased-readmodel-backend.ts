import { declareCapabilities, readmodelBackendCapabilities } from "./backend.js";
import { noteFence } from "./lock-fencing.js";
import { ProcessLease } from "./process-lease.js";
import type { ReadmodelStoreBackend } from "./readmodel-store-backend.js";

/** A readmodel backend with every lease method: what the readmodel runner calls, unconditionally. */
export type LeasedReadmodelStoreBackend = ReadmodelStoreBackend &
  Required<Pick<ReadmodelStoreBackend, "tryLock" | "unlock" | "fencingToken" | "checkFencingToken" | "lockHolder" | "onLockLost">>;

/** The leased form of each backend, decided once per backend. */
const leasedForms = new WeakMap<ReadmodelStoreBackend, LeasedReadmodelStoreBackend>();

/**
 * `backend` as the readmodel runner uses it: every lease method there, so the
 * runner never asks whether one exists. Decided once per backend, from its
 * capabilities ({@link readmodelBackendCapabilities}):
 * - a backend with every lease method (the engines') is used as it is;
 *   otherwise a view of it that declares the backend's capabilities:
 * - one without tryLock gets an in-process lease ({@link ProcessLease}: the
 *   backend is the one owner, as in SQLite and Postgres; fencing tokens
 *   checked before its transactions commit), which keeps what such a backend
 *   did before: every facade given it processes every event;
 * - one with its own tryLock keeps it and gets what it lacks as "none": no
 *   fencing token (the runner warns MNEME_UNFENCED_LOCK), no recorded holder,
 *   no loss notices.
 * Every other member is the backend's own, so its transactions and
 * collections are the ones the readmodel writes through.
 */
export function leasedBackend(backend: ReadmodelStoreBackend): LeasedReadmodelStoreBackend {
  let leased = leasedForms.get(backend);
  if (leased === undefined) {
    leased = leaseOf(backend);
    leasedForms.set(backend, leased);
  }
  return leased;
}

function leaseOf(backend: ReadmodelStoreBackend): LeasedReadmodelStoreBackend {
  const capabilities = readmodelBackendCapabilities(backend);
  const own = backend as LeasedReadmodelStoreBackend;
  if (capabilities.locks && capabilities.fencing && capabilities.lockHolder && capabilities.lockLossNotice) return own;
  const fills: Partial<Record<keyof LeasedReadmodelStoreBackend, unknown>> = {};
  if (!capabilities.locks) {
    Object.assign(fills, inProcessLease(backend));
  } else {
    if (!capabilities.fencing) {
      fills.fencingToken = (): number | undefined => undefined;
      fills.checkFencingToken = async (): Promise<void> => undefined;
    }
    if (!capabilities.lockHolder) fills.lockHolder = async (): Promise<string | undefined> => undefined;
    if (!capabilities.lockLossNotice) fills.onLockLost = (): (() => void) => () => undefined;
  }
  const bound = new Map<PropertyKey, unknown>();
  const view = new Proxy(own, {
    get(target, key) {
      if (Object.hasOwn(fills, key)) return fills[key as keyof LeasedReadmodelStoreBackend];
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      // The backend's own methods run on the backend (its private state), bound once.
      let fn = bound.get(key);
      if (fn === undefined || (fn as { original?: unknown }).original !== value) {
        fn = Object.assign((value as (...a: unknown[]) => unknown).bind(target), { original: value });
        bound.set(key, fn);
      }
      return fn;
    },
  });
  // The view offers what the backend offers: questions about it are answered from the backend's capabilities.
  declareCapabilities(view, capabilities);
  return view;
}

/**
 * The lease methods of a backend that has none: an in-process lease, and a
 * transaction that checks the fences noted in it before it commits (a
 * transaction inside it joins it, as the backend's own do).
 */
function inProcessLease(backend: ReadmodelStoreBackend): Partial<LeasedReadmodelStoreBackend> {
  const lease = new ProcessLease();
  // The fences of the running transaction: the backend serialises its transactions, so one runs at a time.
  let fences: Map<string, number> | undefined;
  return {
    tryLock: async (handler, holder) => lease.tryLock(handler, holder),
    unlock: async (handler) => lease.unlock(handler),
    fencingToken: (handler) => lease.tokenOf(handler),
    checkFencingToken: async (handler, token) => noteFence(fences, handler, token),
    lockHolder: async (handler) => lease.holderOf(handler),
    onLockLost: (listener) => lease.onLockLost(listener),
    transaction: <R>(fn: () => Promise<R>): Promise<R> =>
      backend.transaction(async () => {
        if (fences !== undefined) return fn();
        const mine = new Map<string, number>();
        fences = mine;
        try {
          const result = await fn();
          lease.check(mine);
          return result;
        } finally {
          fences = undefined;
        }
      }),
  };
}
