/**
 * Where a facade's senders live. A sharded app serves the accounts,
 * identities, groups and sessions from its home shard only; the other shards'
 * facades are linked to that one here, so the built-in authorizer and
 * credential resolution of every shard read senders where they are, in the
 * same process (no request crosses the network for it).
 */
import type { FacadeHandle } from "../model/facade-handle.js";

// Keyed by the facade object: a link lives as long as its facade, and only the functions below reach it.
const directories = new WeakMap<object, () => FacadeHandle>();

/**
 * Makes `facade` read its senders from the facade `directory` returns (called
 * at each lookup, so the directory may be created after `facade`).
 * @example
 * useSenderDirectory(shardFacade, () => homeFacade);
 */
export function useSenderDirectory(facade: FacadeHandle, directory: () => FacadeHandle): void {
  directories.set(facade, directory);
}

/** True when `facade` reads its senders from another facade (without resolving that one: it may not exist yet). */
export function hasSenderDirectory(facade: FacadeHandle): boolean {
  return directories.has(facade);
}

/** The facade whose readmodels hold `facade`'s senders: its directory when it has one, else itself. */
export function senderDirectoryOf(facade: FacadeHandle): FacadeHandle {
  return directories.get(facade)?.() ?? facade;
}
