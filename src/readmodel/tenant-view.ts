import type { CollectionScope, ReadmodelCollection } from "../store/readmodel-store-backend.js";
import { isPartOf } from "./base-event-handler.js";
import { GenerationalCollection } from "./readmodel-generations.js";
import { inTenantScope } from "./tenant-scope.js";

const COLLECTION_METHODS = ["get", "getMany", "put", "putMany", "delete", "deleteMany", "list", "count", "clear"] as const;

/** A collection whose every call runs in `scope` (a collection handed out of a tenant's view stays in it). */
function scopedCollection<T>(c: ReadmodelCollection<T>, scope: CollectionScope): ReadmodelCollection<T> {
  const out: Record<string, unknown> = {};
  for (const m of COLLECTION_METHODS) {
    const fn = c[m] as (...args: unknown[]) => unknown;
    out[m] = (...args: unknown[]) => inTenantScope(scope, () => fn.apply(c, args));
  }
  return out as unknown as ReadmodelCollection<T>;
}

function inScope(value: unknown, scope: CollectionScope): unknown {
  return value instanceof GenerationalCollection ? scopedCollection(value, scope) : value;
}

/**
 * `readmodel` as one tenant sees it: each of its methods and getters runs in
 * the tenant's scope, so the tenant-scoped collections it reaches read only
 * that tenant's documents and write with that tenant, and a collection it
 * hands out (a field, a getter, a return value) stays in the scope. Code
 * that a method leaves behind to run later (a callback, an iterator) runs
 * outside the scope. A part the readmodel is composed of (an outbox) is
 * handed out as that tenant's view of it.
 * @internal
 */
export function tenantView<R extends object>(readmodel: R, tenantUuid: string): R {
  const scope: CollectionScope = Object.freeze({ readTenantUuid: tenantUuid, writeTenantUuid: tenantUuid });
  return new Proxy(readmodel, {
    get(target, prop) {
      const value: unknown = inTenantScope(scope, () => Reflect.get(target, prop, target));
      if (isPartOf(target, value)) return tenantView(value as object, tenantUuid);
      if (typeof value !== "function") return inScope(value, scope);
      return (...args: unknown[]) =>
        inTenantScope(scope, () => {
          const out: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
          return out instanceof Promise ? out.then((v) => inScope(v, scope)) : inScope(out, scope);
        });
    },
    set(target, prop, value) {
      return Reflect.set(target, prop, value, target);
    },
  });
}
