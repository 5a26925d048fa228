import { randomBytes, randomUUID } from "node:crypto";
import { MnemeError } from "../model/errors.js";
import type { PersonalData } from "../model/tokens.js";
import type { Event, NewEvent } from "../model/types.js";
import type { KeyStore, SubjectKey } from "../store/key-store.js";
import { jsonSafeProblem } from "../store/json-safe.js";
import { SUBJECT_KEY_BYTES, validateKeyStoreId } from "../store/key-store.js";
import { ENVELOPE_MEMBER, ERASED, envelopeKeyId, type FieldEnvelope, openValue, sealValue } from "./field-envelope.js";
import { KeyCache } from "./key-cache.js";
import { mapValues, pointerTokens, replaceAt, valueAt } from "./personal-fields.js";

/** Options of {@link PersonalDataProtection}. */
export interface PersonalDataProtectionOptions {
  readonly keyStore: KeyStore;
  /** The personal data settings of a stored event's type (by its domain and name), undefined when it has none. */
  readonly personalDataOf: (domain: string, name: string) => PersonalData | undefined;
  /** Keys held in memory (by id and by subject, each). Default 10,000. */
  readonly keyCacheSize?: number;
  /**
   * How long a cached key is used before the key store is asked again (ms):
   * the bound within which a key forgotten by another instance stops being
   * used here. Default 5,000. (The instance that forgets drops it at once.)
   */
  readonly keyCacheTtlMs?: number;
  /** Milliseconds clock for the cache; default Date.now. */
  readonly now?: () => number;
}

/** A value sealed here recently: a primitive as it is, a container as JSON text. */
interface Recalled {
  readonly value?: unknown;
  readonly json?: string;
}

/** A payload with its envelopes opened, and how many of them read as "[erased]" (key gone, or unreadable). */
export interface OpenedPayload {
  readonly payload: unknown;
  readonly erased: number;
}

/** Subjects starting with this are mneme's own (e.g. the key of the e-mail index): `forget` refuses them. */
export const RESERVED_SUBJECT_PREFIX = "mneme:";

/**
 * Encrypts the personal fields of new events and decrypts them on every read
 * (see docs/privacy.md). Each field's JSON value is sealed with AES-256-GCM
 * under its subject's key into `{ "$enc": "v1:<keyId>:<iv>:<data>" }`; a field
 * whose key is gone reads as "[erased]". Keys are made on first use (32 random
 * bytes, stored before the events are appended, so a crash leaves at most an
 * unused key) and cached, bounded, for `keyCacheTtlMs`.
 */
export class PersonalDataProtection {
  readonly keyStore: KeyStore;
  readonly #personalDataOf: (domain: string, name: string) => PersonalData | undefined;
  readonly #cache: KeyCache;
  /** Key creations in flight, by subject: concurrent appends of a new subject ask the store once. */
  readonly #creating = new Map<string, Promise<SubjectKey>>();
  /** Bumped by every forget: a key fetched or made across one is used, not cached. */
  #forgetEpoch = 0;
  /**
   * The clear values of the envelopes this process sealed last (bounded): the
   * events an append returns, and their live delivery, read them back without
   * a decryption. Emptied by every forget.
   */
  #justSealed = new Map<string, Recalled>();
  /**
   * The generation before #justSealed: two generations of at most half the
   * limit each, swapped when the newer fills. (Evicting the oldest entry of one
   * Map one by one made every insert walk the deleted slots at its front: the
   * cost of a seal grew with the number of seals.)
   */
  #justSealedBefore = new Map<string, Recalled>();
  readonly #justSealedLimit: number;

  constructor(opts: PersonalDataProtectionOptions) {
    if (typeof opts?.keyStore?.ensureKey !== "function") throw new MnemeError("INVALID_REQUEST", "personal data: a keyStore is required");
    const size = opts.keyCacheSize ?? 10_000;
    const ttl = opts.keyCacheTtlMs ?? 5_000;
    if (!Number.isSafeInteger(size) || size < 1) {
      throw new MnemeError("INVALID_REQUEST", `personal data: keyCacheSize must be an integer >= 1, got ${String(size)}`);
    }
    if (!Number.isSafeInteger(ttl) || ttl < 0) {
      throw new MnemeError("INVALID_REQUEST", `personal data: keyCacheTtlMs must be an integer >= 0, got ${String(ttl)}`);
    }
    this.keyStore = opts.keyStore;
    this.#personalDataOf = opts.personalDataOf;
    this.#cache = new KeyCache(size, ttl, opts.now ?? Date.now);
    this.#justSealedLimit = size;
  }

  /**
   * The events with their personal fields sealed (new objects; the given ones
   * are not changed). INVALID_EVENTS when a subject function throws or returns
   * something other than a non-empty string; nothing is appended then.
   */
  async encrypt(events: readonly NewEvent[]): Promise<NewEvent[]> {
    const plans: { index: number; spec: PersonalData; subject: string }[] = [];
    events.forEach((e, index) => {
      const spec = this.#personalDataOf(e.domain, e.name);
      if (spec !== undefined) plans.push({ index, spec, subject: subjectOf(spec, e) });
    });
    if (plans.length === 0) return [...events];
    const keys = new Map<string, SubjectKey>();
    await Promise.all([...new Set(plans.map((p) => p.subject))].map(async (s) => keys.set(s, await this.#liveKey(s))));
    const out = [...events];
    for (const { index, spec, subject } of plans) {
      const e = events[index] as NewEvent;
      const key = keys.get(subject) as SubjectKey;
      let payload: unknown = e.payload;
      for (const field of spec.fields) {
        const tokens = pointerTokens(field);
        const value = valueAt(payload, tokens);
        if (value === undefined) continue;
        // Sealed values are JSON text: what JSON.stringify would drop or change is refused here, as the repository would.
        const problem = jsonSafeProblem(value);
        if (problem !== undefined) {
          throw new MnemeError("INVALID_EVENTS", `events[${index}].payload${field}${problem.pointer}: ${problem.message}`, {
            details: [{ pointer: `/${index}/payload${field}${problem.pointer}`, message: problem.message }],
          });
        }
        const envelope = sealValue(value, key.keyId, key.key);
        this.#remember(envelope, value);
        payload = replaceAt(payload, tokens, envelope);
      }
      out[index] = { ...e, payload };
    }
    return out;
  }

  /**
   * The events with their sealed fields opened: every envelope in the payload
   * of an event whose type declares personal data (wherever it sits, so a
   * payload of an older shape opens too); "[erased]" where the key is gone.
   * Events without envelopes are returned as they are; the others are copies.
   */
  decrypt(events: Event[]): Event[] | Promise<Event[]> {
    let out: Event[] | undefined;
    let missing: Set<string> | undefined;
    let pending: number[] | undefined;
    for (let i = 0; i < events.length; i++) {
      const e = events[i] as Event;
      if (this.#personalDataOf(e.domain, e.name) === undefined) continue;
      let unresolved = false;
      // One pass opens what cached keys can open; envelopes of keys not seen yet wait for one fetch per page.
      const payload = mapValues(e.payload, (v) => {
        const keyId = envelopeKeyId(v);
        if (keyId === undefined) return undefined;
        const key = this.#cache.byId(keyId);
        if (key !== undefined) return this.#recall(v as FieldEnvelope) ?? openValue(v as FieldEnvelope, key.key);
        if (this.#cache.isGone(keyId)) return ERASED;
        (missing ??= new Set()).add(keyId);
        unresolved = true;
        return v;
      });
      if (payload !== e.payload) (out ??= events.slice())[i] = { ...e, payload };
      if (unresolved) (pending ??= []).push(i);
    }
    // Synchronous unless a key must be fetched: live delivery of events without personal data keeps its pace.
    if (missing === undefined || pending === undefined) return out ?? events;
    const page = out ?? events.slice();
    const waiting = pending;
    return this.#fetch(missing).then((fetched) => {
      for (const i of waiting) {
        const e = page[i] as Event;
        const payload = mapValues(e.payload, (v) => {
          const keyId = envelopeKeyId(v);
          if (keyId === undefined) return undefined;
          const key = fetched.get(keyId) ?? this.#cache.byId(keyId);
          return key === undefined ? ERASED : openValue(v as FieldEnvelope, key.key);
        });
        page[i] = { ...e, payload };
      }
      return page;
    });
  }

  /**
   * The subject's live key (made and stored on first use), for sealing values
   * outside events: command records, outbox entries. See {@link seal}.
   */
  liveKey(subject: string): Promise<SubjectKey> {
    return this.#liveKey(subject);
  }

  /** One value sealed under `key` (from {@link liveKey}) into an envelope; the value must be JSON-safe. */
  seal(value: unknown, key: SubjectKey): FieldEnvelope {
    const envelope = sealValue(value, key.keyId, key.key);
    this.#remember(envelope, value);
    return envelope;
  }

  /**
   * Any JSON value with every envelope in it opened ("[erased]" where the key
   * is gone), with the count of erased ones: command payloads, outbox
   * entries. Synchronous unless a key must be fetched.
   */
  openPayload(payload: unknown): OpenedPayload | Promise<OpenedPayload> {
    let missing: Set<string> | undefined;
    let erased = 0;
    const opened = (v: unknown, key: SubjectKey | undefined): unknown => {
      const out = key === undefined ? ERASED : (this.#recall(v as FieldEnvelope) ?? openValue(v as FieldEnvelope, key.key));
      if (out === ERASED) erased++;
      return out;
    };
    const first = mapValues(payload, (v) => {
      const keyId = envelopeKeyId(v);
      if (keyId === undefined) return undefined;
      const key = this.#cache.byId(keyId);
      if (key !== undefined || this.#cache.isGone(keyId)) return opened(v, key);
      (missing ??= new Set()).add(keyId);
      return v;
    });
    if (missing === undefined) return { payload: first, erased };
    return this.#fetch(missing).then((fetched) => {
      const rest = mapValues(first, (v) => {
        const keyId = envelopeKeyId(v);
        return keyId === undefined ? undefined : opened(v, fetched.get(keyId) ?? this.#cache.byId(keyId));
      });
      return { payload: rest, erased };
    });
  }

  /** Fetches keys by id in one call: found ones are cached, missing ones remembered as gone. */
  async #fetch(wanted: Set<string>): Promise<Map<string, SubjectKey>> {
    const epoch = this.#forgetEpoch;
    const got = await this.keyStore.keysById([...wanted]);
    const fetched = new Map<string, SubjectKey>();
    for (const id of wanted) {
      const key = got.get(id);
      if (key === undefined) this.#cache.markGone(id);
      else {
        fetched.set(id, key);
        // A forget here while the read was in flight: use the key for this read only.
        if (epoch === this.#forgetEpoch) this.#cache.putById(key);
      }
    }
    return fetched;
  }

  /**
   * Deletes the subject's keys and drops them from this process's cache at
   * once; resolves how many keys were deleted. Other instances stop using
   * their cached copies within `keyCacheTtlMs`.
   */
  async forget(subject: string): Promise<number> {
    validateKeyStoreId("subject", subject);
    if (subject.startsWith(RESERVED_SUBJECT_PREFIX)) {
      throw new MnemeError("INVALID_REQUEST", `personal data: subjects starting with "${RESERVED_SUBJECT_PREFIX}" are mneme's own keys`);
    }
    this.#forgetEpoch++;
    this.#cache.dropSubject(subject);
    this.#justSealed.clear();
    this.#justSealedBefore.clear();
    try {
      return await this.keyStore.forget(subject);
    } finally {
      // Again: a read that started before the delete may have cached the key meanwhile.
      this.#forgetEpoch++;
      this.#cache.dropSubject(subject);
    }
  }

  /**
   * A secret of mneme's own kept in the key store under a reserved subject
   * (`mneme:<name>`), made on first use; e.g. the key of a keyed hash (HMAC)
   * that indexes a value without storing it in clear.
   */
  async systemKey(name: string): Promise<Uint8Array> {
    return (await this.#liveKey(`${RESERVED_SUBJECT_PREFIX}${name}`)).key;
  }

  #remember(envelope: FieldEnvelope, value: unknown): void {
    // Containers as JSON text: the caller may change its payload after the append.
    const kept: Recalled = typeof value === "object" && value !== null ? { json: JSON.stringify(value) } : { value };
    this.#justSealed.set(envelope[ENVELOPE_MEMBER], kept);
    if (this.#justSealed.size >= Math.max(1, this.#justSealedLimit >> 1)) {
      this.#justSealedBefore = this.#justSealed;
      this.#justSealed = new Map();
    }
  }

  /** The clear value of an envelope sealed here recently (a fresh copy), or undefined. */
  #recall(envelope: FieldEnvelope): unknown {
    const kept = this.#justSealed.get(envelope[ENVELOPE_MEMBER]) ?? this.#justSealedBefore.get(envelope[ENVELOPE_MEMBER]);
    if (kept === undefined) return undefined;
    return kept.json === undefined ? kept.value : JSON.parse(kept.json);
  }

  /** The subject's live key: cached, else the stored one, else a new one (one creation per subject at a time). */
  async #liveKey(subject: string): Promise<SubjectKey> {
    const cached = this.#cache.bySubject(subject);
    if (cached !== undefined) return cached;
    let pending = this.#creating.get(subject);
    if (pending === undefined) {
      const epoch = this.#forgetEpoch;
      pending = this.keyStore
        .ensureKey({ subject, keyId: randomUUID(), key: new Uint8Array(randomBytes(SUBJECT_KEY_BYTES)) })
        .then((key) => {
          if (epoch === this.#forgetEpoch) this.#cache.putLive(key);
          return key;
        })
        .finally(() => this.#creating.delete(subject));
      this.#creating.set(subject, pending);
    }
    return pending;
  }
}

/** The subject of a new event, checked (INVALID_EVENTS). */
function subjectOf(spec: PersonalData, e: NewEvent): string {
  let subject: unknown;
  try {
    subject = spec.subject(e.payload, e);
  } catch (cause) {
    throw new MnemeError("INVALID_EVENTS", `${e.domain}.${e.name}: personalData.subject threw`, { cause });
  }
  try {
    validateKeyStoreId("subject", subject);
  } catch {
    throw new MnemeError(
      "INVALID_EVENTS",
      `${e.domain}.${e.name}: personalData.subject must return a non-empty string (at most 512 characters, no U+0000), got ${typeof subject}`,
    );
  }
  return subject as string;
}
