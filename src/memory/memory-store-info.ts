import type { StoreInfo } from "../store/store-info.js";

/** The StoreInfo of an in-memory store holding the `size` items of `items`: the newest createdAt is the last item's. */
export function memoryStoreInfo(items: Iterable<{ readonly createdAt: number }>, size: number): StoreInfo {
  let last = 0;
  for (const item of items) if (item.createdAt > last) last = item.createdAt;
  return { storeType: "memory", numItems: size, lastItemCreatedAt: last, connectionInfo: "memory" };
}
