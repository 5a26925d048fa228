import type { SubjectKey } from "../store/key-store.js";

interface Entry {
  readonly key: SubjectKey;
  readonly expiresAt: number;
}

/**
 * The keys a process holds: by key id (for reads) and by subject (the live key
 * new events are encrypted with), each entry valid for `ttlMs` so a key
 * forgotten by another instance stops being used within that bound, least
 * recently used first out past `maxKeys`. Key ids known to be gone are
 * remembered too (bounded the same way): a forgotten key never comes back, so
 * they never expire.
 */
export class KeyCache {
  readonly #byId = new Map<string, Entry>();
  readonly #bySubject = new Map<string, Entry>();
  readonly #gone = new Set<string>();

  constructor(
    private readonly maxKeys: number,
    private readonly ttlMs: number,
    private readonly now: () => number,
  ) {}

  /** A cached key by id, or undefined (absent or expired). */
  byId(keyId: string): SubjectKey | undefined {
    return this.#fresh(this.#byId, keyId);
  }

  /** A cached live key of a subject, or undefined. */
  bySubject(subject: string): SubjectKey | undefined {
    return this.#fresh(this.#bySubject, subject);
  }

  /** True when the key id is known to be forgotten. */
  isGone(keyId: string): boolean {
    return this.#gone.has(keyId);
  }

  /** Keeps a key found by id. */
  putById(key: SubjectKey): void {
    this.#put(this.#byId, key.keyId, key);
  }

  /** Keeps a subject's live key (also by id). */
  putLive(key: SubjectKey): void {
    this.#put(this.#bySubject, key.subject, key);
    this.#put(this.#byId, key.keyId, key);
  }

  /** Remembers a key id the store does not have. */
  markGone(keyId: string): void {
    this.#byId.delete(keyId);
    this.#gone.add(keyId);
    if (this.#gone.size > this.maxKeys) this.#gone.delete(this.#gone.values().next().value as string);
  }

  /** Drops every key of a subject at once (forgotten here): its ids are marked gone. */
  dropSubject(subject: string): void {
    this.#bySubject.delete(subject);
    for (const [keyId, e] of this.#byId) if (e.key.subject === subject) this.markGone(keyId);
  }

  #fresh(map: Map<string, Entry>, id: string): SubjectKey | undefined {
    const e = map.get(id);
    if (e === undefined) return undefined;
    if (e.expiresAt <= this.now()) {
      map.delete(id);
      return undefined;
    }
    // Most recently used last.
    map.delete(id);
    map.set(id, e);
    return e.key;
  }

  #put(map: Map<string, Entry>, id: string, key: SubjectKey): void {
    map.delete(id);
    map.set(id, { key, expiresAt: this.now() + this.ttlMs });
    if (map.size > this.maxKeys) map.delete(map.keys().next().value as string);
  }
}
