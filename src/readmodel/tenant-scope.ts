import { AsyncLocalStorage } from "node:async_hooks";
import { MnemeError } from "../model/errors.js";
import type { CollectionScope, ReadmodelCollection, ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";

/**
 * The tenant side of a readmodel's collections in the current async context:
 * while a handler applies an event, its writes carry the event's tenant;
 * inside a tenant's view of a readmodel (`ctx.readmodel` in a handler,
 * `asTenant` for trusted code), reads see only that tenant's documents and
 * writes carry it. Outside both, collections are unscoped (trusted code).
 * @internal
 */
const current = new AsyncLocalStorage<CollectionScope>();

/** Runs fn so that the tenant-scoped collections reached inside it use `scope`. */
export function inTenantScope<R>(scope: CollectionScope, fn: () => R): R {
  return current.run(scope, fn);
}

/** The scope of the current async context; undefined when unscoped. */
export function currentTenantScope(): CollectionScope | undefined {
  return current.getStore();
}

/**
 * The backend's collection `name` in the current tenant scope (`readmodel`
 * names it in errors). A backend without `tenantScopes` cannot limit a read to
 * a tenant: such a read is refused, never shown every tenant's documents;
 * writes go on untagged (seen by unscoped reads only).
 */
export function collectionInScope<T>(backend: ReadmodelStoreBackend, name: string, readmodel: string): ReadmodelCollection<T> {
  const scope = current.getStore();
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
