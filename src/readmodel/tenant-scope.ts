import { AsyncLocalStorage } from "node:async_hooks";
import type { CollectionScope } from "../store/readmodel-store-backend.js";

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
