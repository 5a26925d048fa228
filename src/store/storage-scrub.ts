/**
 * An optional capability of a store: overwriting what deleted data may have
 * left behind in its storage (freed pages, a write-ahead log), so that after
 * `facade.forget` and the readmodels' clean-up no clear copy of a forgotten
 * value stays in the files the store wrote. See docs/privacy.md.
 */

/** A store that can scrub its storage. */
export interface StorageScrub {
  /**
   * Names the storage the store writes (a file, a database schema): stores
   * sharing one are scrubbed once.
   */
  storageScope(): string;
  /** Overwrites what deleted rows left behind; rejects (UNAVAILABLE) when it could not complete. */
  scrubStorage(): Promise<void>;
}

/** Whether `store` offers {@link StorageScrub}. */
export function canScrubStorage(store: unknown): store is StorageScrub {
  const s = store as Partial<StorageScrub> | null;
  return typeof s === "object" && s !== null && typeof s.scrubStorage === "function" && typeof s.storageScope === "function";
}
