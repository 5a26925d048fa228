/**
 * The `close()` of a bundle of stores sharing one connection (createSqliteBackends,
 * createPostgresBackends): closes every store, then releases what the bundle
 * owns (a file, a pool) even when a store failed to close. Idempotent: later calls get the first call's promise.
 */
export function closeStoresOnce(stores: readonly { close(): Promise<void> }[], release: () => unknown): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => {
    closing ??= (async () => {
      try {
        await Promise.all(stores.map((s) => s.close()));
      } finally {
        await release();
      }
    })();
    return closing;
  };
}
