import { type AdministratorPermission, newPermission, type Permission } from "../model/permission.js";

/** The five stores as the Runtime's store access names them. */
export type StoreName = "event" | "command" | "data" | "cache" | "log";
export type StoreAction = "Info" | "Read" | "Update" | "Delete";

/** Permission name prefix per store (spec 2.3). */
export const STORE_PREFIXES: Readonly<Record<StoreName, string>> = Object.freeze({
  event: "StoreEvent",
  command: "StoreCommand",
  data: "StoreData",
  cache: "StoreCache",
  log: "StoreLog",
});

const STORE_TITLES: Readonly<Record<StoreName, string>> = {
  event: "EventStore",
  command: "CommandStore",
  data: "DataStore",
  cache: "CacheStore",
  log: "LogStore",
};

const ACTION_TEXT: Readonly<Record<StoreAction, string>> = {
  Info: "Retrieve information about the",
  Read: "Read entries of the",
  Update: "Update entries of the",
  Delete: "Delete entries of the",
};

export const STORE_NAMES: readonly StoreName[] = ["event", "command", "data", "cache", "log"];
export const STORE_ACTIONS: readonly StoreAction[] = ["Info", "Read", "Update", "Delete"];

/** `<Store>.<Action>`, e.g. `StoreEvent.Read`. */
export function storePermissionName(store: StoreName, action: StoreAction): string {
  return `${STORE_PREFIXES[store]}.${action}`;
}

/** The 20 store permissions of domain `Runtime`: `kind: "administrator"`, granted only through the authorizer. */
export function storePermissionDefinitions(): AdministratorPermission[] {
  const out: AdministratorPermission[] = [];
  for (const store of STORE_NAMES) {
    for (const action of STORE_ACTIONS) {
      out.push(
        newPermission(
          "Runtime",
          storePermissionName(store, action),
          `${ACTION_TEXT[action]} ${STORE_TITLES[store]} (system administrators only)`,
        ),
      );
    }
  }
  return out;
}

/** What registerStorePermissions needs of a facade. */
export interface StorePermissionHost {
  readonly permissions: {
    has(domain: string, type: string): boolean;
    register(p: Permission): void;
    get(domain: string, type: string): Permission | undefined;
  };
  readonly runtime: { readonly stores: { markRegistered(): void } };
}

/**
 * Registers the 20 store permissions (`StoreEvent.Info` ... `StoreLog.Delete`)
 * in domain `Runtime`. Run it at startup: before it, every store operation
 * fails with STORE_PERMISSIONS_NOT_REGISTERED. Idempotent.
 */
export function registerStorePermissions(facade: StorePermissionHost): Permission[] {
  const out: Permission[] = [];
  for (const p of storePermissionDefinitions()) {
    if (!facade.permissions.has(p.domain, p.type)) facade.permissions.register(p);
    out.push(facade.permissions.get(p.domain, p.type)!);
  }
  facade.runtime.stores.markRegistered();
  return out;
}
