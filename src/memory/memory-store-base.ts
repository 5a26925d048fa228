import { storeClosed } from "../store/store-closed.js";

/** What an in-memory store without resources of its own shares: open until close(), then STORE_CLOSED. */
export abstract class MemoryStoreBase {
  private closed = false;

  async init(): Promise<void> {
    this.assertOpen();
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  /** Throws STORE_CLOSED (naming the store's class) once closed. */
  protected assertOpen(): void {
    if (this.closed) throw storeClosed(this.constructor.name);
  }
}
