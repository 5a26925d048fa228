import { randomBytes, randomUUID } from "node:crypto";
import { expect } from "vitest";
import type { KeyStore, NewSubjectKey, SubjectKey } from "../store/key-store.js";
import { defineContract, expectClosedBehaviour, expectNoSecret, expectNs, expectRejectsWith } from "./contract-harness.js";

/** A fresh candidate key for `subject`: a random key id and 32 random bytes. */
function candidate(subject: string, more: Partial<NewSubjectKey> = {}): NewSubjectKey {
  return { subject, keyId: randomUUID(), key: new Uint8Array(randomBytes(32)), ...more };
}

/** A subject name no other test uses (the store may be shared between tests). */
function subjectName(label: string): string {
  return `${label}-${randomUUID()}`;
}

function sameBytes(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  return a !== undefined && b !== undefined && Buffer.from(a).equals(Buffer.from(b));
}

/**
 * The KeyStore conformance suite: the first candidate of a subject wins (also
 * among concurrent calls), lookups by subject and by key id, forget deletes
 * every key of the subject and its key ids are never used again, input checks
 * with nothing written, copies in and out, info, and STORE_CLOSED after close.
 * That the bytes of a forgotten key are gone from the storage itself (files,
 * dumps) depends on the storage: test it with your backend's own access to it.
 */
export const describeKeyStoreContract = defineContract<KeyStore>("KeyStore contract", (test) => {
  test("ensureKey stores the first candidate and resolves it; keyOf and keysById find it; createdAt defaults to now (ns)", async (store) => {
    const subject = subjectName("ann");
    const c = candidate(subject);
    const made = await store.ensureKey(c);
    expect(made).toMatchObject({ subject, keyId: c.keyId });
    expect(sameBytes(made.key, c.key)).toBe(true);
    expectNs(made.createdAt);
    const bySubject = await store.keyOf(subject);
    expect(bySubject).toMatchObject({ subject, keyId: c.keyId, createdAt: made.createdAt });
    expect(sameBytes(bySubject?.key, c.key)).toBe(true);
    const byId = await store.keysById([c.keyId, "no-such-key", c.keyId]);
    expect([...byId.keys()]).toEqual([c.keyId]);
    expect(sameBytes(byId.get(c.keyId)?.key, c.key)).toBe(true);
    expect(byId.get(c.keyId)?.subject).toBe(subject);
    const dated = candidate(subjectName("bob"), { createdAt: 1_700_000_000_000_000_000 });
    expect((await store.ensureKey(dated)).createdAt).toBe(1_700_000_000_000_000_000);
  });

  test("a second candidate for a subject resolves the stored key and is not stored", async (store) => {
    const subject = subjectName("ann");
    const first = candidate(subject);
    await store.ensureKey(first);
    const second = candidate(subject);
    const got = await store.ensureKey(second);
    expect(got.keyId).toBe(first.keyId);
    expect(sameBytes(got.key, first.key)).toBe(true);
    expect((await store.keysById([second.keyId])).size).toBe(0);
  });

  test("concurrent candidates for one subject: one wins and every call resolves it", async (store) => {
    const subject = subjectName("race");
    const candidates = Array.from({ length: 20 }, () => candidate(subject));
    const results = await Promise.all(candidates.map((c) => store.ensureKey(c)));
    const winner = results[0] as SubjectKey;
    expect(candidates.some((c) => c.keyId === winner.keyId && sameBytes(c.key, winner.key))).toBe(true);
    for (const r of results) {
      expect(r.keyId).toBe(winner.keyId);
      expect(sameBytes(r.key, winner.key)).toBe(true);
    }
    expect((await store.keysById(candidates.map((c) => c.keyId))).size).toBe(1);
  });

  test("subjects are kept apart: each has its own key", async (store) => {
    const a = candidate(subjectName("a"));
    const b = candidate(subjectName("b"));
    await Promise.all([store.ensureKey(a), store.ensureKey(b)]);
    expect((await store.keyOf(a.subject))?.keyId).toBe(a.keyId);
    expect((await store.keyOf(b.subject))?.keyId).toBe(b.keyId);
    const both = await store.keysById([a.keyId, b.keyId]);
    expect(both.get(a.keyId)?.subject).toBe(a.subject);
    expect(both.get(b.keyId)?.subject).toBe(b.subject);
    expect(await store.keyOf(subjectName("nobody"))).toBeUndefined();
    expect((await store.keysById([])).size).toBe(0);
  });

  test("forget deletes the subject's key: lookups miss it, other subjects keep theirs, and forget again deletes nothing", async (store) => {
    const a = candidate(subjectName("a"));
    const b = candidate(subjectName("b"));
    await store.ensureKey(a);
    await store.ensureKey(b);
    expect(await store.forget(a.subject)).toBe(1);
    expect(await store.keyOf(a.subject)).toBeUndefined();
    expect((await store.keysById([a.keyId, b.keyId])).has(a.keyId)).toBe(false);
    expect((await store.keyOf(b.subject))?.keyId).toBe(b.keyId);
    expect(await store.forget(a.subject)).toBe(0);
    expect(await store.forget(subjectName("nobody"))).toBe(0);
  });

  test("after forget a new candidate makes a new key; the forgotten one never comes back", async (store) => {
    const subject = subjectName("ann");
    const old = candidate(subject);
    await store.ensureKey(old);
    await store.forget(subject);
    // The forgotten key id, even with its old bytes, is refused.
    await expectRejectsWith(() => store.ensureKey({ ...old }), "CONFLICT");
    expect(await store.keyOf(subject)).toBeUndefined();
    const fresh = candidate(subject);
    const got = await store.ensureKey(fresh);
    expect(got.keyId).toBe(fresh.keyId);
    expect(got.keyId).not.toBe(old.keyId);
    expect((await store.keysById([old.keyId])).size).toBe(0);
    expect((await store.keysById([fresh.keyId])).size).toBe(1);
    // Forgotten for another subject too.
    await expectRejectsWith(() => store.ensureKey(candidate(subjectName("other"), { keyId: old.keyId })), "CONFLICT");
  });

  test("a key id live for one subject is refused for another (CONFLICT), and nothing is written", async (store) => {
    const a = candidate(subjectName("a"));
    await store.ensureKey(a);
    const other = subjectName("b");
    await expectRejectsWith(() => store.ensureKey(candidate(other, { keyId: a.keyId })), "CONFLICT");
    expect(await store.keyOf(other)).toBeUndefined();
    expect((await store.keysById([a.keyId])).get(a.keyId)?.subject).toBe(a.subject);
  });

  test("forget racing ensureKey leaves either no key or a live key that lookups agree on", async (store) => {
    for (let round = 0; round < 10; round++) {
      const subject = subjectName(`race${round}`);
      const first = candidate(subject);
      await store.ensureKey(first);
      const next = candidate(subject);
      const [, , got] = await Promise.all([store.forget(subject), store.ensureKey(next), store.ensureKey(candidate(subject))]);
      const live = await store.keyOf(subject);
      if (live !== undefined) {
        expect(live.keyId).not.toBe(first.keyId);
        expect((await store.keysById([live.keyId])).size).toBe(1);
      }
      expect((await store.keysById([first.keyId])).size).toBe(0);
      expect(got.subject).toBe(subject);
    }
  });

  test("bad subjects, key ids and keys give INVALID_REQUEST, and nothing is written", async (store) => {
    const subject = subjectName("ann");
    const bad: unknown[] = [
      { ...candidate(subject), subject: "" },
      { ...candidate(subject), subject: 7 },
      { ...candidate(subject), subject: "a\u0000b" },
      { ...candidate(subject), subject: "x".repeat(513) },
      { ...candidate(subject), keyId: "" },
      { ...candidate(subject), keyId: null },
      { ...candidate(subject), key: new Uint8Array(31) },
      { ...candidate(subject), key: new Uint8Array(33) },
      { ...candidate(subject), key: "not bytes" },
      { ...candidate(subject), key: Array.from({ length: 32 }, () => 1) },
      { ...candidate(subject), createdAt: -1 },
      { ...candidate(subject), createdAt: 1.5 },
      null,
      "key",
    ];
    for (const c of bad) await expectRejectsWith(() => store.ensureKey(c as NewSubjectKey), "INVALID_REQUEST");
    expect(await store.keyOf(subject)).toBeUndefined();
    expect((await store.info()).numItems).toBe(0);
    await expectRejectsWith(() => store.keyOf(""), "INVALID_REQUEST");
    await expectRejectsWith(() => store.forget(""), "INVALID_REQUEST");
    await expectRejectsWith(() => store.forget(3 as unknown as string), "INVALID_REQUEST");
    await expectRejectsWith(() => store.keysById("k" as unknown as string[]), "INVALID_REQUEST");
    await expectRejectsWith(() => store.keysById(["ok", ""]), "INVALID_REQUEST");
    expect(await store.keyOf("x".repeat(512))).toBeUndefined();
  });

  test("stored keys cannot be changed through given or returned bytes", async (store) => {
    const c = candidate(subjectName("ann"));
    const original = Uint8Array.from(c.key);
    const got = await store.ensureKey(c);
    c.key.fill(7);
    got.key.fill(9);
    const again = await store.keyOf(c.subject);
    expect(sameBytes(again?.key, original)).toBe(true);
    again?.key.fill(1);
    expect(sameBytes((await store.keysById([c.keyId])).get(c.keyId)?.key, original)).toBe(true);
  });

  test("many key ids in one keysById call", async (store) => {
    const made = await Promise.all(Array.from({ length: 1200 }, (_, i) => store.ensureKey(candidate(subjectName(`s${i}`)))));
    const found = await store.keysById([...made.map((k) => k.keyId), "missing"]);
    expect(found.size).toBe(1200);
    for (const k of made) expect(sameBytes(found.get(k.keyId)?.key, k.key)).toBe(true);
  }, 60_000);

  test("info reports the live keys and the newest createdAt", async (store) => {
    const empty = await store.info();
    expect(empty).toMatchObject({ numItems: 0, lastItemCreatedAt: 0 });
    expect(empty.storeType.length).toBeGreaterThan(0);
    expectNoSecret(empty.connectionInfo);
    const a = candidate(subjectName("a"), { createdAt: 1_800_000_000_000_000_000 });
    await store.ensureKey(a);
    await store.ensureKey(candidate(subjectName("b"), { createdAt: 1_700_000_000_000_000_000 }));
    expect(await store.info()).toMatchObject({ numItems: 2, lastItemCreatedAt: 1_800_000_000_000_000_000 });
    await store.forget(a.subject);
    expect(await store.info()).toMatchObject({ numItems: 1 });
  });

  test("close is idempotent and later calls reject with STORE_CLOSED", async (store) => {
    const c = candidate(subjectName("a"));
    await store.ensureKey(c);
    await expectClosedBehaviour(store, () => store.ensureKey(candidate(subjectName("b"))));
    await expectRejectsWith(() => store.keyOf(c.subject), "STORE_CLOSED");
    await expectRejectsWith(() => store.keysById([c.keyId]), "STORE_CLOSED");
    await expectRejectsWith(() => store.forget(c.subject), "STORE_CLOSED");
    await expectRejectsWith(() => store.info(), "STORE_CLOSED");
  });
});
