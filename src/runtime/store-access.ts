import { MnemeError } from "../model/errors.js";
import { newUuid } from "../model/clock.js";
import type { Event, RequestContext } from "../model/types.js";
import { type StoreAction, type StoreName, STORE_NAMES, storePermissionName } from "../permissions/store-permissions.js";
import type { PermissionRegistry } from "../permissions/permission-registry.js";
import type { CacheStore } from "../store/cache-store.js";
import type { CommandStore } from "../store/command-store.js";
import type { DataStore } from "../store/data-store.js";
import type { EventRepository } from "../store/event-repository.js";
import type { LogStore } from "../store/log-store.js";
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, type StoreInfo, type StorePage } from "../store/store-info.js";
import type { SystemEventProducer } from "./system-events.js";

/** The stores the Runtime governs. */
export interface GovernedStores {
  readonly eventRepository: EventRepository;
  readonly commandStore: CommandStore;
  readonly dataStore: DataStore;
  readonly cacheStore: CacheStore;
  readonly logStore: LogStore;
  readonly permissions: PermissionRegistry;
  readonly systemEvents: SystemEventProducer;
  /** Opens the personal fields of command records (they read "[erased]" once forgotten). */
  readonly commandPayloads?: { open(payload: unknown): Promise<{ readonly payload: unknown }> };
  /** The registered event type of a path, for the tags of event store entries. */
  eventType?(path: string): { readonly tags?: (payload: any) => readonly string[] } | undefined;
}

/**
 * Store access for system administrators: info / read / update / delete per
 * store, each checked against its `<Store>.<Action>` permission, each change
 * written to the LogStore as an audit entry.
 */
export class StoreAccess {
  #registered = false;

  constructor(readonly stores: GovernedStores) {}

  /** True once registerStorePermissions ran. */
  get permissionsRegistered(): boolean {
    return this.#registered;
  }

  /** @internal Called by registerStorePermissions. */
  markRegistered(): void {
    this.#registered = true;
  }

  /** Rejects unless the sender holds `<Store>.<Action>`. */
  async authorize(store: unknown, action: StoreAction, reqCtx: RequestContext | undefined, payload: unknown = {}): Promise<StoreName> {
    const name = checkStore(store);
    if (!this.#registered) {
      throw new MnemeError(
        "STORE_PERMISSIONS_NOT_REGISTERED",
        "store permissions are not registered: call registerStorePermissions(facade) at startup",
      );
    }
    const ctx = reqCtx ?? {};
    await this.stores.permissions.check(ctx, {
      queryUuid: newUuid(),
      domain: "Runtime",
      name: storePermissionName(name, action),
      payload,
      reqCtx: ctx,
    });
    return name;
  }

  /**
   * Events of a type that declares tags (DCB, docs/dcb.md) carry `tags`: its
   * tags function over the payload as read, which is what the append stored
   * for it unless the function changed since. A function that throws on a
   * payload read after forget leaves the entry without tags.
   */
  #withTags(events: readonly Event[]): unknown[] {
    const typeOf = this.stores.eventType;
    if (typeOf === undefined) return [...events];
    return events.map((e) => {
      const tagsOf = typeOf.call(this.stores, `${e.domain}.${e.name}`)?.tags;
      if (tagsOf === undefined) return e;
      try {
        const tags = tagsOf(e.payload);
        return Array.isArray(tags) && tags.every((t) => typeof t === "string") ? { ...e, tags: [...new Set(tags)] } : e;
      } catch {
        return e;
      }
    });
  }

  async info(store: StoreName, reqCtx: RequestContext): Promise<StoreInfo> {
    const name = await this.authorize(store, "Info", reqCtx, { store });
    return this.#store(name).info();
  }

  /**
   * A page of entries; `cursor` from the previous page's `nextCursor`. With
   * `tenantUuid`, the event, command and log stores give only that tenant's
   * entries (the data and cache stores hold no tenant); without it, every
   * tenant's (trusted code; the Runtime domain passes the caller's tenant).
   */
  async read(
    store: StoreName,
    reqCtx: RequestContext,
    opts: { cursor?: string; limit?: number; tenantUuid?: string } = {},
  ): Promise<StorePage<unknown>> {
    const name = await this.authorize(store, "Read", reqCtx, { store, ...opts });
    const limit = checkLimit(opts.limit);
    if (opts.tenantUuid !== undefined && typeof opts.tenantUuid !== "string")
      throw new MnemeError("INVALID_REQUEST", "tenantUuid must be a string");
    const tenant = opts.tenantUuid === undefined ? {} : { tenantUuid: opts.tenantUuid };
    const page = opts.cursor === undefined ? { limit } : { cursor: checkCursor(opts.cursor), limit };
    switch (name) {
      case "event": {
        const after = page.cursor === undefined ? 0 : Number(page.cursor);
        if (!Number.isSafeInteger(after) || after < 0)
          throw new MnemeError("INVALID_REQUEST", "an event store cursor is a position (a non-negative integer)");
        for await (const batch of this.stores.eventRepository.readAll({ afterPosition: after, batchSize: limit, ...tenant })) {
          const last = batch[batch.length - 1];
          const items = this.#withTags(batch);
          return batch.length === limit && last !== undefined ? { items, nextCursor: String(last.position) } : { items };
        }
        return { items: [] };
      }
      case "command": {
        const records = await this.stores.commandStore.list({ ...page, ...tenant });
        const payloads = this.stores.commandPayloads;
        if (payloads === undefined) return records;
        const items = await Promise.all(records.items.map(async (r) => ({ ...r, payload: (await payloads.open(r.payload)).payload })));
        return { ...records, items };
      }
      case "data":
        return this.stores.dataStore.list(page);
      case "cache":
        return this.stores.cacheStore.list(page);
      case "log":
        return this.stores.logStore.list({ ...page, ...tenant });
    }
  }

  /** Writes an entry: data (string or bytes as base64 `{ base64, contentType }`) and cache (`{ value, ttlMs? }` or any JSON). */
  async update(store: StoreName, reqCtx: RequestContext, key: string, value: unknown): Promise<{ key: string }> {
    const name = await this.authorize(store, "Update", reqCtx, { store, key });
    checkKey(key);
    switch (name) {
      case "event":
        throw new MnemeError("INVALID_ACTION", "the EventStore is append-only: its entries cannot be updated");
      case "command":
        throw new MnemeError("INVALID_ACTION", "the CommandStore is an audit trail: its records can be deleted, not changed");
      case "log":
        throw new MnemeError("INVALID_ACTION", "the LogStore is append-only: its entries can be deleted, not changed");
      case "data": {
        if (typeof value === "string") await this.stores.dataStore.put(key, value);
        else if (isObject(value) && typeof value.base64 === "string") {
          const opts = typeof value.contentType === "string" ? { contentType: value.contentType } : {};
          await this.stores.dataStore.put(key, decodeBase64(value.base64), opts);
        } else if (isObject(value) && typeof value.text === "string") {
          const opts = typeof value.contentType === "string" ? { contentType: value.contentType } : {};
          await this.stores.dataStore.put(key, value.text, opts);
        } else throw new MnemeError("INVALID_REQUEST", "a DataStore value is a string, { text, contentType? } or { base64, contentType? }");
        break;
      }
      case "cache": {
        if (isObject(value) && "value" in value) {
          const ttl = value.ttlMs;
          if (ttl !== undefined && (typeof ttl !== "number" || !(ttl > 0)))
            throw new MnemeError("INVALID_REQUEST", "ttlMs must be a positive number");
          await this.stores.cacheStore.set(key, value.value, ttl === undefined ? {} : { ttlMs: ttl });
        } else {
          await this.stores.cacheStore.set(key, value);
        }
        break;
      }
    }
    await this.#audit(name, "Update", key, reqCtx);
    return { key };
  }

  async delete(store: StoreName, reqCtx: RequestContext, key: string): Promise<{ deleted: boolean }> {
    const name = await this.authorize(store, "Delete", reqCtx, { store, key });
    checkKey(key);
    let deleted: boolean;
    switch (name) {
      case "event":
        throw new MnemeError("INVALID_ACTION", "the EventStore is append-only: its entries cannot be deleted");
      case "command":
        deleted = await this.stores.commandStore.delete(key);
        break;
      case "data":
        deleted = await this.stores.dataStore.delete(key);
        break;
      case "cache":
        deleted = await this.stores.cacheStore.delete(key);
        break;
      case "log": {
        const id = Number(key);
        if (!Number.isSafeInteger(id) || id < 1)
          throw new MnemeError("INVALID_REQUEST", "a LogStore key is an entry id (a positive integer)");
        deleted = await this.stores.logStore.delete(id);
        break;
      }
    }
    if (!deleted) throw new MnemeError("NOT_FOUND", `no ${name} store entry ${JSON.stringify(key)}`);
    await this.#audit(name, "Delete", key, reqCtx);
    return { deleted };
  }

  #store(name: StoreName): { info(): Promise<StoreInfo> } {
    switch (name) {
      case "event":
        return this.stores.eventRepository;
      case "command":
        return this.stores.commandStore;
      case "data":
        return this.stores.dataStore;
      case "cache":
        return this.stores.cacheStore;
      case "log":
        return this.stores.logStore;
    }
  }

  async #audit(store: StoreName, action: StoreAction, key: string, reqCtx: RequestContext): Promise<void> {
    const by = { senderAccountUuid: reqCtx.senderAccountUuid ?? "", senderIdentityUuid: reqCtx.senderIdentityUuid ?? "" };
    await this.stores.logStore.append({
      level: "info",
      message: `${storePermissionName(store, action)} ${key}`,
      source: "mneme.runtime.stores",
      ...(reqCtx.senderTenantUuid ? { tenantUuid: reqCtx.senderTenantUuid } : {}),
      data: { store, action, key, ...by },
    });
    if (this.stores.systemEvents.running) this.stores.systemEvents.publish("StoreEntryChanged", { store, action, key, ...by });
  }
}

/** Standard base64 to bytes with the web's atob; INVALID_REQUEST when it is not base64. */
function decodeBase64(text: string): Uint8Array {
  let binary: string;
  try {
    binary = atob(text);
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", "base64 must be standard base64 text", { cause: e });
  }
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

function checkStore(store: unknown): StoreName {
  if (typeof store !== "string" || !(STORE_NAMES as readonly string[]).includes(store)) {
    throw new MnemeError("INVALID_REQUEST", `store must be one of ${STORE_NAMES.join(", ")} (got ${JSON.stringify(store)})`);
  }
  return store as StoreName;
}

function checkLimit(limit: unknown): number {
  if (limit === undefined) return DEFAULT_PAGE_LIMIT;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_LIMIT) {
    throw new MnemeError("INVALID_REQUEST", `limit must be an integer in 1..${MAX_PAGE_LIMIT}`);
  }
  return limit;
}

function checkCursor(cursor: unknown): string {
  if (typeof cursor !== "string" || cursor.length > 2048)
    throw new MnemeError("INVALID_REQUEST", "cursor must be a string from a previous page");
  return cursor;
}

function checkKey(key: unknown): void {
  if (typeof key !== "string" || key === "" || key.length > 1024)
    throw new MnemeError("INVALID_REQUEST", "key must be a non-empty string of at most 1024 characters");
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
