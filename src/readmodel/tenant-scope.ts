import { AsyncLocalStorage } from "node:async_hooks";
import { MnemeError } from "../model/errors.js";
import type { CollectionScope, ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";

/**
 * What a readmodel's collections resolve to in the current async context: the
 * tenant side (while a handler applies an event, its writes carry the event's
 * tenant; inside a tenant's view of a readmodel, `ctx.readmodel` in a handler
 * or `asTenant` for trusted code, reads see only that tenant's documents and
 * writes carry it; outside both, collections are unscoped: trusted code) and
 * the generation (inside a restore from zero's batch, the readmodel being
 * rebuilt reaches its next generation, see readmodel-generations.ts).
 *
 * One context per batch: the runner enters a batch's context once (see
 * `inReadmodelBatch`) and the tenant of each event is set in it as the event
 * is applied (`withEventTenant`), not one async context per event. Batches
 * run in contexts of their own, so two batches running at once (partitions,
 * a rebuild beside live delivery) never see each other's tenant or generation.
 * @internal
 */
interface ReadmodelContext {
  /** The tenant scope of collections; undefined: unscoped. In a batch's context, the tenant of the event being applied. */
  scope: CollectionScope | undefined;
  /** The readmodel whose next generation this context builds (a restore from zero's batch), if any. */
  readonly building: string | undefined;
  /** True for the context a runner entered for one batch (its `scope` follows the events applied). */
  readonly batch: boolean;
}

const current = new AsyncLocalStorage<ReadmodelContext>();

/** Runs fn so that the tenant-scoped collections reached inside it use `scope` (the generation stays the caller's). */
export function inTenantScope<R>(scope: CollectionScope, fn: () => R): R {
  return current.run({ scope, building: current.getStore()?.building, batch: false }, fn);
}

/**
 * Runs one batch of a readmodel's runner (`fn`: its transaction) in a context
 * of its own: unscoped until an event's tenant is set by `withEventTenant`,
 * and reaching the next generation of `building` (a restore from zero's
 * batches) or the served one (undefined).
 */
export function inReadmodelBatch<R>(building: string | undefined, fn: () => Promise<R>): Promise<R> {
  return current.run({ scope: undefined, building, batch: true }, fn);
}

/** In a batch's context: clears the event tenant (before each event, and before the batch's afterBatch hooks). */
export function clearEventTenant(): void {
  const c = current.getStore();
  if (c !== undefined && c.batch) c.scope = undefined;
}

/**
 * Runs a handler function of an event of `tenantUuid` so that what it writes
 * to tenant-scoped collections carries that tenant. In a batch's context the
 * tenant is set in it (the runner applies a batch's events one after the
 * other and clears it before the next); elsewhere (a handler function called
 * directly) in a context of its own.
 */
export function withEventTenant<R>(tenantUuid: string, fn: () => R): R {
  const c = current.getStore();
  if (c === undefined || !c.batch) return current.run({ scope: { writeTenantUuid: tenantUuid }, building: c?.building, batch: false }, fn);
  c.scope = { writeTenantUuid: tenantUuid };
  return fn();
}

/** The scope of the current async context; undefined when unscoped. */
export function currentTenantScope(): CollectionScope | undefined {
  return current.getStore()?.scope;
}

/** Whether the current async context builds `readmodel`'s next generation (a restore from zero's batches). */
export function buildingNextGeneration(readmodel: string): boolean {
  return current.getStore()?.building === readmodel;
}

/**
 * The backend's collection `name` in the current tenant scope (`readmodel`
 * names it in errors). A backend without `tenantScopes` cannot limit a read to
 * a tenant: such a read is refused, never shown every tenant's documents;
 * writes go on untagged (seen by unscoped reads only).
 */
export function collectionInScope<T>(backend: ReadmodelStoreBackend, name: string, readmodel: string): ReadmodelCollection<T> {
  const scope = current.getStore()?.scope;
  if (scope === undefined) return backend.collection<T>(name);
  if (backend.tenantScopes === true) return backend.collection<T>(name, scope);
  if (scope.readTenantUuid !== undefined) {
    throw new MnemeError(
      "INVALID_STATE",
      `readmodel ${readmodel}: its ReadmodelStoreBackend stores no tenant per document (tenantScopes), so a read for tenant ${JSON.stringify(scope.readTenantUuid)} would see every tenant's documents of ${name}; use a backend with tenantScopes, or declare the collection { tenancy: "global" }`,
    );
  }
  return backend.collection<T>(name);
}
