/**
 * Personal data protection without a facade: the event option's checks at
 * definition, sealing and opening of fields (top-level names and JSON
 * pointers), "[erased]" after forget, the key cache's bounds (the instance
 * that forgets drops the key at once, another within keyCacheTtlMs on a fake
 * clock), one key per new subject under concurrent appends, and subject errors.
 */
import { describe, expect, it } from "vitest";
import { MemoryKeyStore } from "../../src/memory/memory-key-store.js";
import { defineDomain } from "../../src/model/domain.js";
import { isMnemeError } from "../../src/model/errors.js";
import type { EventType } from "../../src/model/tokens.js";
import type { Event, NewEvent } from "../../src/model/types.js";
import { ERASED, envelopeKeyId } from "../../src/privacy/field-envelope.js";
import { PersonalDataProtection } from "../../src/privacy/personal-data-protection.js";
import type { KeyStore } from "../../src/store/key-store.js";

interface Registered {
  email: string;
  name: string;
  age: number;
  address?: { street: string; city: string };
  contacts?: { phone: string }[];
  "a/b"?: string;
}
const People = defineDomain("People");
const PersonRegistered = People.event<Registered>("PersonRegistered", {
  personalData: { subject: (_p, e) => e.aggregateUuid, fields: ["email", "name", "/address/street", "/contacts/0/phone", "a/b"] },
});
const PersonRenamed = People.event<{ personUuid: string; name: string }>("PersonRenamed", {
  personalData: { subject: (p) => p.personUuid, fields: ["name"] },
});
const Plain = People.event<{ email: string }>("Plain");

const types = new Map<string, EventType>([PersonRegistered, PersonRenamed, Plain].map((t) => [t.name, t as EventType]));
function protection(keyStore: KeyStore, more: { now?: () => number; keyCacheTtlMs?: number; keyCacheSize?: number } = {}) {
  return new PersonalDataProtection({
    keyStore,
    personalDataOf: (d, n) => (d === "People" ? types.get(n)?.personalData : undefined),
    ...more,
  });
}

let position = 0;
/** A stored event as a repository would return it. */
function stored(e: NewEvent): Event {
  position++;
  return {
    eventUuid: `e${position}`,
    position,
    tenantUuid: "",
    domain: e.domain,
    name: e.name,
    aggregateUuid: e.aggregateUuid,
    version: 1,
    createdAt: 1,
    reqCtx: {},
    payload: e.payload,
  };
}

const ann: Registered = {
  email: "ann@example.org",
  name: "Ann",
  age: 41,
  address: { street: "1 Main St", city: "Springfield" },
  contacts: [{ phone: "+1 555 0100" }, { phone: "+1 555 0199" }],
  "a/b": "slash",
};

describe("the personalData option", () => {
  it("carries the fields as JSON pointers on the token", () => {
    expect(PersonRegistered.personalData?.fields).toEqual(["/email", "/name", "/address/street", "/contacts/0/phone", "/a~1b"]);
    expect(Plain.personalData).toBeUndefined();
  });

  it("refuses bad settings with INVALID_DOMAIN", () => {
    const D = defineDomain("Bad");
    const bad: unknown[] = [
      null,
      "email",
      { fields: ["email"] },
      { subject: "accountUuid", fields: ["email"] },
      { subject: () => "s", fields: [] },
      { subject: () => "s", fields: "email" },
      { subject: () => "s", fields: [""] },
      { subject: () => "s", fields: ["/"] },
      { subject: () => "s", fields: [3] },
      { subject: () => "s", fields: ["/a//b"] },
      { subject: () => "s", fields: ["/a~2"] },
      { subject: () => "s", fields: ["/a~"] },
      { subject: () => "s", fields: ["email", "/email"] },
      { subject: () => "s", fields: ["/address", "/address/street"] },
      { subject: () => "s", fields: ["/address/street", "address"] },
    ];
    bad.forEach((personalData, i) => {
      let err: unknown;
      try {
        D.event(`E${i}`, { personalData } as never);
      } catch (e) {
        err = e;
      }
      expect(isMnemeError(err, "INVALID_DOMAIN"), `case ${i}: ${String(err)}`).toBe(true);
    });
    expect(D.events.size).toBe(0);
  });
});

describe("PersonalDataProtection", () => {
  it("seals the listed fields only, leaves the caller's payload alone, and reads them back", async () => {
    const p = protection(new MemoryKeyStore());
    const given = structuredClone(ann);
    const [sealed, plain] = await p.encrypt([PersonRegistered.create("p1", given), Plain.create("x", { email: "clear@example.org" })]);
    expect(given).toEqual(ann);
    const payload = sealed!.payload as Record<string, unknown>;
    expect(payload.age).toBe(41);
    expect((payload.address as Record<string, unknown>).city).toBe("Springfield");
    expect(((payload.contacts as Record<string, unknown>[])[1] as Record<string, unknown>).phone).toBe("+1 555 0199");
    for (const v of [payload.email, payload.name, (payload.address as Record<string, unknown>).street, payload["a/b"]]) {
      expect(envelopeKeyId(v)).toBeDefined();
    }
    const text = JSON.stringify(sealed);
    // Ciphertext is base64: a short letters-only value ("Ann") could appear in it by chance, never as a whole JSON string.
    for (const secret of ["ann@example.org", "Ann", "1 Main St", "+1 555 0100", "slash"])
      expect(text).not.toContain(JSON.stringify(secret));
    for (const secret of ["ann@example.org", "1 Main St", "+1 555 0100"]) expect(text).not.toContain(secret);
    expect(plain!.payload).toEqual({ email: "clear@example.org" });
    const [back, plainBack] = await p.decrypt([stored(sealed!), stored(plain!)]);
    expect(back!.payload).toEqual(ann);
    expect(plainBack!.payload).toEqual({ email: "clear@example.org" });
  });

  it("absent fields stay absent; any JSON value is sealed and read back", async () => {
    const p = protection(new MemoryKeyStore());
    const values: unknown[] = [null, 0, -1.5, true, "", "ü 🎉", [1, { a: 2 }], { deep: { x: [null] } }];
    for (const v of values) {
      const [e] = await p.encrypt([PersonRenamed.create("r", { personUuid: "s1", name: v as string })]);
      expect(envelopeKeyId((e!.payload as Record<string, unknown>).name)).toBeDefined();
      expect((await p.decrypt([stored(e!)]))[0]!.payload).toEqual({ personUuid: "s1", name: v });
    }
    const [partial] = await p.encrypt([PersonRegistered.create("p2", { email: "b@example.org", name: "B", age: 3 })]);
    expect(Object.keys(partial!.payload as object).sort()).toEqual(["age", "email", "name"]);
  });

  it("after forget the subject's fields read as [erased]; other subjects and clear fields are untouched", async () => {
    const keys = new MemoryKeyStore();
    const p = protection(keys);
    const [a, b] = await p.encrypt([PersonRegistered.create("ann", ann), PersonRegistered.create("bob", { ...ann, name: "Bob" })]);
    const events = [stored(a!), stored(b!)];
    expect(await p.forget("ann")).toBe(1);
    const [ea, eb] = await p.decrypt(events);
    expect(ea!.payload).toEqual({
      email: ERASED,
      name: ERASED,
      age: 41,
      address: { street: ERASED, city: "Springfield" },
      contacts: [{ phone: ERASED }, { phone: "+1 555 0199" }],
      "a/b": ERASED,
    });
    expect((eb!.payload as Registered).name).toBe("Bob");
    // A fresh process (no cache) reads the same.
    expect((await protection(keys).decrypt(events))[0]!.payload).toEqual(ea!.payload);
  });

  it("a subject forgotten and then used again gets a new key: old events stay erased, new ones read", async () => {
    const p = protection(new MemoryKeyStore());
    const [old] = await p.encrypt([PersonRenamed.create("r", { personUuid: "s", name: "Old" })]);
    await p.forget("s");
    const [fresh] = await p.encrypt([PersonRenamed.create("r", { personUuid: "s", name: "New" })]);
    expect(envelopeKeyId((fresh!.payload as Record<string, unknown>).name)).not.toBe(
      envelopeKeyId((old!.payload as Record<string, unknown>).name),
    );
    const read = await p.decrypt([stored(old!), stored(fresh!)]);
    expect(read.map((e) => (e.payload as { name: string }).name)).toEqual([ERASED, "New"]);
  });

  it("another instance stops using a forgotten key within keyCacheTtlMs (fake clock)", async () => {
    const keys = new MemoryKeyStore();
    let now = 1_000;
    const a = protection(keys, { now: () => now, keyCacheTtlMs: 5_000 });
    const b = protection(keys, { now: () => now, keyCacheTtlMs: 5_000 });
    const [e] = await a.encrypt([PersonRenamed.create("r", { personUuid: "s", name: "Ann" })]);
    const ev = stored(e!);
    expect((await b.decrypt([ev]))[0]!.payload).toMatchObject({ name: "Ann" });
    await a.forget("s");
    expect((await a.decrypt([ev]))[0]!.payload).toMatchObject({ name: ERASED });
    now += 4_999;
    expect((await b.decrypt([ev]))[0]!.payload).toMatchObject({ name: "Ann" }); // cached, within the bound
    now += 1;
    expect((await b.decrypt([ev]))[0]!.payload).toMatchObject({ name: ERASED });
  });

  it("concurrent appends of a new subject make one key; keys are looked up once per page", async () => {
    const keys = new MemoryKeyStore();
    let ensures = 0;
    let lookups = 0;
    const counting: KeyStore = Object.assign(Object.create(keys) as KeyStore, {
      ensureKey: (c: Parameters<KeyStore["ensureKey"]>[0]) => (ensures++, keys.ensureKey(c)),
      keysById: (ids: readonly string[]) => (lookups++, keys.keysById(ids)),
    });
    const p = protection(counting);
    const batches = await Promise.all(
      Array.from({ length: 10 }, (_, i) => p.encrypt([PersonRenamed.create(`r${i}`, { personUuid: "same", name: `N${i}` })])),
    );
    expect(ensures).toBe(1);
    expect(new Set(batches.map(([e]) => envelopeKeyId((e!.payload as Record<string, unknown>).name))).size).toBe(1);
    const reader = protection(counting);
    const page = batches.map(([e]) => stored(e!));
    const read = await reader.decrypt(page);
    expect(read.map((e) => (e.payload as { name: string }).name)).toEqual(batches.map((_, i) => `N${i}`));
    expect(lookups).toBe(1);
    await reader.decrypt(page);
    expect(lookups).toBe(1); // cached
  });

  it("a damaged or foreign envelope reads as [erased]; events without envelopes come back as they are", async () => {
    const p = protection(new MemoryKeyStore());
    const [e] = await p.encrypt([PersonRenamed.create("r", { personUuid: "s", name: "Ann" })]);
    const env = (e!.payload as { name: { $enc: string } }).name.$enc;
    const parts = env.split(":");
    const flipped = `${parts.slice(0, 3).join(":")}:${parts[3]!.startsWith("A") ? "B" : "A"}${parts[3]!.slice(1)}`;
    const damaged = stored({ ...e!, payload: { personUuid: "s", name: { $enc: flipped } } });
    expect(((await p.decrypt([damaged]))[0]!.payload as { name: unknown }).name).toBe(ERASED);
    const clear = stored(PersonRenamed.create("r", { personUuid: "s", name: "written before personalData" }));
    const page = [clear];
    expect(await p.decrypt(page)).toBe(page);
  });

  it("a subject function that throws or returns no id gives INVALID_EVENTS, and no key is made", async () => {
    const keys = new MemoryKeyStore();
    const D = defineDomain("Odd");
    const Throws = D.event<{ x: string }>("Throws", {
      personalData: {
        subject: () => {
          throw new Error("boom");
        },
        fields: ["x"],
      },
    });
    const Empty = D.event<{ x: string }>("Empty", { personalData: { subject: () => "", fields: ["x"] } });
    const NotString = D.event<{ x: string }>("NotString", { personalData: { subject: () => 7 as unknown as string, fields: ["x"] } });
    const byName = new Map<string, EventType>([Throws, Empty, NotString].map((t) => [t.name, t as EventType]));
    const p = new PersonalDataProtection({ keyStore: keys, personalDataOf: (_d, n) => byName.get(n)?.personalData });
    for (const t of [Throws, Empty, NotString]) {
      await expect(p.encrypt([t.create("a", { x: "secret" })])).rejects.toSatisfy((e: unknown) => isMnemeError(e, "INVALID_EVENTS"));
    }
    expect((await keys.info()).numItems).toBe(0);
  });

  it("forget refuses mneme's own subjects and bad ids; options are checked", async () => {
    const p = protection(new MemoryKeyStore());
    const k = await p.systemKey("email-index");
    expect(k.byteLength).toBe(32);
    expect(Buffer.from(await p.systemKey("email-index")).equals(Buffer.from(k))).toBe(true);
    await expect(p.forget("mneme:email-index")).rejects.toSatisfy((e: unknown) => isMnemeError(e, "INVALID_REQUEST"));
    await expect(p.forget("")).rejects.toSatisfy((e: unknown) => isMnemeError(e, "INVALID_REQUEST"));
    expect(() => protection(new MemoryKeyStore(), { keyCacheSize: 0 })).toThrow(/keyCacheSize/);
    expect(() => protection(new MemoryKeyStore(), { keyCacheTtlMs: -1 })).toThrow(/keyCacheTtlMs/);
  });

  it("the cache stays within keyCacheSize and still reads every key", async () => {
    const keys = new MemoryKeyStore();
    const p = protection(keys, { keyCacheSize: 3 });
    const sealed = await p.encrypt(
      Array.from({ length: 10 }, (_, i) => PersonRenamed.create(`r${i}`, { personUuid: `s${i}`, name: `N${i}` })),
    );
    const read = await protection(keys, { keyCacheSize: 3 }).decrypt(sealed.map(stored));
    expect(read.map((e) => (e.payload as { name: string }).name)).toEqual(Array.from({ length: 10 }, (_, i) => `N${i}`));
  });

  it("values sealed by this process read back as they were sealed, not as the caller changed them after", async () => {
    const p = protection(new MemoryKeyStore());
    const given = { personUuid: "s", name: { first: "Ann", tags: ["a"] } as unknown as string };
    const [e] = await p.encrypt([PersonRenamed.create("r", given)]);
    (given.name as unknown as { first: string; tags: string[] }).first = "changed";
    (given.name as unknown as { first: string; tags: string[] }).tags.push("b");
    const ev = stored(e!);
    const first = (await p.decrypt([ev]))[0]!.payload as { name: { first: string; tags: string[] } };
    expect(first.name).toEqual({ first: "Ann", tags: ["a"] });
    first.name.tags.push("c"); // a reader changing what it got changes nothing for the next reader
    expect(((await p.decrypt([ev]))[0]!.payload as { name: unknown }).name).toEqual({ first: "Ann", tags: ["a"] });
    await p.forget("s");
    expect(((await p.decrypt([ev]))[0]!.payload as { name: unknown }).name).toBe(ERASED);
  });
});
