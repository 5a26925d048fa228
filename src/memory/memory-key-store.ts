import { nowNs } from "../model/clock.js";
import { memoryStoreInfo } from "./memory-store-info.js";
import type { KeyStore, NewSubjectKey, SubjectKey } from "../store/key-store.js";
import { keyIdTaken, validateKeyIds, validateKeyStoreId, validateNewSubjectKey } from "../store/key-store.js";
import type { StoreInfo } from "../store/store-info.js";
import { storeClosed } from "../store/store-closed.js";

interface Stored {
  readonly keyId: string;
  readonly key: Uint8Array;
  readonly createdAt: number;
}

/**
 * The in-memory KeyStore: one live key per subject, forgotten key ids kept as
 * ids only (never their bytes), so none is reused. Keys live as long as the
 * process: pair it with the in-memory event repository, never with a durable one.
 */
export class MemoryKeyStore implements KeyStore {
  private readonly bySubject = new Map<string, Stored>();
  private readonly subjectOfKey = new Map<string, string>();
  /** Every key id ever stored (live or forgotten). */
  private readonly usedKeyIds = new Set<string>();
  private closed = false;

  async init(): Promise<void> {
    this.assertOpen();
  }

  async ensureKey(candidate: NewSubjectKey): Promise<SubjectKey> {
    this.assertOpen();
    const k = validateNewSubjectKey(candidate, nowNs);
    const live = this.bySubject.get(k.subject);
    if (live !== undefined) return copyOf(k.subject, live);
    if (this.usedKeyIds.has(k.keyId)) throw keyIdTaken(k.keyId);
    const stored = { keyId: k.keyId, key: k.key, createdAt: k.createdAt };
    this.bySubject.set(k.subject, stored);
    this.subjectOfKey.set(k.keyId, k.subject);
    this.usedKeyIds.add(k.keyId);
    return copyOf(k.subject, stored);
  }

  async keyOf(subject: string): Promise<SubjectKey | undefined> {
    this.assertOpen();
    validateKeyStoreId("subject", subject);
    const live = this.bySubject.get(subject);
    return live === undefined ? undefined : copyOf(subject, live);
  }

  async keysById(keyIds: readonly string[]): Promise<Map<string, SubjectKey>> {
    this.assertOpen();
    const out = new Map<string, SubjectKey>();
    for (const keyId of validateKeyIds(keyIds)) {
      const subject = this.subjectOfKey.get(keyId);
      const live = subject === undefined ? undefined : this.bySubject.get(subject);
      if (subject !== undefined && live !== undefined && live.keyId === keyId) out.set(keyId, copyOf(subject, live));
    }
    return out;
  }

  async forget(subject: string): Promise<number> {
    this.assertOpen();
    validateKeyStoreId("subject", subject);
    const live = this.bySubject.get(subject);
    if (live === undefined) return 0;
    live.key.fill(0);
    this.bySubject.delete(subject);
    this.subjectOfKey.delete(live.keyId);
    return 1;
  }

  async info(): Promise<StoreInfo> {
    this.assertOpen();
    return memoryStoreInfo(this.bySubject.values(), this.bySubject.size);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const k of this.bySubject.values()) k.key.fill(0);
    this.bySubject.clear();
    this.subjectOfKey.clear();
  }

  private assertOpen(): void {
    if (this.closed) throw storeClosed("MemoryKeyStore");
  }
}

function copyOf(subject: string, k: Stored): SubjectKey {
  return { subject, keyId: k.keyId, key: Uint8Array.from(k.key), createdAt: k.createdAt };
}
