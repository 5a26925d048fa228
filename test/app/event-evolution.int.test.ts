/**
 * Event versions and upcasting: events are stored with the version they were
 * written in; every read path (aggregate load, live delivery, restore from
 * zero, history, the event store as the Runtime reads it) hands out the
 * current version, and the stored payload stays as written. Renamed events
 * read under their new name. Bad upcasters and events from a newer release are
 * UPCAST_FAILED and corrupt nothing. On memory, SQLite and Postgres: a "v1"
 * facade writes, a "v3" facade on the same database reads.
 */
import { describe, expect, it } from "vitest";
import { createFacade, defineDomain, type Event, type Facade, type FacadeOptions, MnemeError, ProjectionReadmodel } from "mneme";
import type { EventRepository } from "mneme/store";
import { rejection } from "../support/rejections.js";
import { alice, sharedPlaces } from "../support/shared-places.js";

// Release 1: a contact was added with one "name" field.
interface AddedV1 {
  name: string;
}
// Release 2 split the name; release 3 added a country (default "unknown").
interface AddedV3 {
  first: string;
  last: string;
  country: string;
}

function release1() {
  const D = defineDomain("Contacts");
  const ContactAdded = D.event<AddedV1>("ContactAdded");
  const Noted = D.event<{ text: string }>("NoteTaken");
  const Add = D.command<{ contactUuid: string; name: string; note?: string }>("Add");
  D.handleCommand(Add, (_ctx, _cmd, p) => [
    ContactAdded.create(p.contactUuid, { name: p.name }),
    ...(p.note === undefined ? [] : [Noted.create(p.contactUuid, { text: p.note })]),
  ]);
  D.aggregate<{ name: string }>("Contact", {
    initialState: () => ({ name: "" }),
    evolve: { ContactAdded: (_s, p: AddedV1) => ({ name: p.name }) },
  });
  return { D, Add };
}

interface ContactState {
  first: string;
  last: string;
  country: string;
  notes: string[];
}

function release3(opts: { badUpcaster?: "throws" | "nan" } = {}) {
  const D = defineDomain("Contacts");
  const ContactAdded = D.event<AddedV3>("ContactAdded", {
    version: 3,
    upcasters: {
      1: (p: AddedV1) => {
        if (opts.badUpcaster === "throws") throw new Error("cannot split this name");
        const [first = "", ...rest] = p.name.split(" ");
        return { first, last: rest.join(" ") };
      },
      2: (p: { first: string; last: string }) => ({ ...p, country: opts.badUpcaster === "nan" ? Number.NaN : "unknown" }),
    },
  });
  // NoteTaken was renamed to NoteAdded; stored NoteTaken events read as NoteAdded.
  const NoteAdded = D.event<{ text: string }>("NoteAdded", { renamedFrom: "NoteTaken" });
  const Contact = D.aggregate<ContactState>("Contact", {
    initialState: () => ({ first: "", last: "", country: "", notes: [] }),
    evolve: {
      ContactAdded: (s, p: AddedV3) => ({ ...s, first: p.first, last: p.last, country: p.country }),
      NoteAdded: (s, p: { text: string }) => ({ ...s, notes: [...s.notes, p.text] }),
    },
  });
  const Add = D.command<{ contactUuid: string; first: string; last: string; country: string }>("Add");
  D.handleCommand(Add, (_ctx, _cmd, p) => [ContactAdded.create(p.contactUuid, { first: p.first, last: p.last, country: p.country })]);
  const Note = D.command<{ contactUuid: string; text: string }>("Note");
  D.handleCommand(Note, async (ctx, _cmd, p) => {
    await ctx.aggregates.load(Contact, p.contactUuid);
    return [NoteAdded.create(p.contactUuid, { text: p.text })];
  });
  return { D, ContactAdded, NoteAdded, Contact, Add, Note };
}

/** What a handler of release 3 sees: every event it was given, in order. */
class Seen extends ProjectionReadmodel<ContactState> {}

const places = sharedPlaces("evolution");

describe.each(places)("event evolution on %s", (_name, placeOf) => {
  /** Release 1 writes two contacts (one with a note), then stays running (memory stores cannot outlive it). */
  async function written(stores: () => Partial<FacadeOptions>): Promise<Facade> {
    const r1 = release1();
    const f1 = createFacade({ appName: "release-1", ...stores() }).registerDomain(r1.D);
    await f1.start();
    await f1.dispatch(r1.Add, { contactUuid: "c1", name: "Ada King Lovelace", note: "met at the lab" }, { reqCtx: alice });
    await f1.dispatch(r1.Add, { contactUuid: "c2", name: "Alan" }, { reqCtx: alice });
    return f1;
  }

  it("hands out the current version on every read path; the stored payload stays as written", async () => {
    const stores = placeOf();
    const f1 = await written(stores);
    const r3 = release3();
    const f3 = createFacade({ appName: "release-3", ...stores() }).registerDomain(r3.D);
    const seen = new Seen(f3, { aggregate: r3.Contact, name: "Seen" });
    f3.registerReadmodel(seen);
    await f3.start();
    try {
      // aggregate load (inside a command and directly)
      await f3.dispatch(r3.Note, { contactUuid: "c1", text: "second note" }, { reqCtx: alice, waitToFinish: true });
      expect((await f3.loadAggregate(r3.Contact, "c1")).state).toEqual({
        first: "Ada",
        last: "King Lovelace",
        country: "unknown",
        notes: ["met at the lab", "second note"],
      });
      // a new event of release 3 is stored as version 3
      await f3.dispatch(
        r3.Add,
        { contactUuid: "c3", first: "Grace", last: "Hopper", country: "US" },
        { reqCtx: alice, waitToFinish: true },
      );

      // the event store as read paths see it: names and payloads of the current release
      const all: Event[] = [];
      for await (const page of f3.eventRepository.readAll()) all.push(...page);
      expect(all.map((e) => [e.name, e.payload, e.eventVersion])).toEqual([
        ["ContactAdded", { first: "Ada", last: "King Lovelace", country: "unknown" }, 3],
        ["NoteAdded", { text: "met at the lab" }, undefined],
        ["ContactAdded", { first: "Alan", last: "", country: "unknown" }, 3],
        ["NoteAdded", { text: "second note" }, undefined],
        ["ContactAdded", { first: "Grace", last: "Hopper", country: "US" }, 3],
      ]);
      // a filter on the new name finds events stored under the old one
      const notes: Event[] = [];
      for await (const page of f3.eventRepository.readAll({ eventPaths: ["Contacts.NoteAdded"] })) notes.push(...page);
      expect(notes.map((e) => e.payload)).toEqual([{ text: "met at the lab" }, { text: "second note" }]);

      // the Runtime lists the current version and the former name
      expect(f3.runtime.listEvents().filter((e) => e.domain === "Contacts")).toEqual([
        {
          domain: "Contacts",
          domainEvtName: "ContactAdded",
          domainEvtPath: "Contacts.ContactAdded",
          description: expect.any(String),
          version: 3,
        },
        {
          domain: "Contacts",
          domainEvtName: "NoteAdded",
          domainEvtPath: "Contacts.NoteAdded",
          description: expect.any(String),
          renamedFrom: ["NoteTaken"],
        },
      ]);

      // what is stored is what was written
      const raw = (f3.eventRepository as unknown as { stored: EventRepository }).stored;
      const stored = await raw.loadAggregate("c1");
      expect(stored.map((e) => [e.name, e.payload, e.eventVersion])).toEqual([
        ["ContactAdded", { name: "Ada King Lovelace" }, undefined],
        ["NoteTaken", { text: "met at the lab" }, undefined],
        ["NoteAdded", { text: "second note" }, undefined],
      ]);
      expect((await raw.loadAggregate("c3"))[0]).toMatchObject({
        payload: { first: "Grace", last: "Hopper", country: "US" },
        eventVersion: 3,
      });

      // live delivery and the history of the projection
      const c1 = await seen.getModel("c1", { includeHistory: true });
      expect(c1?.model).toEqual({ first: "Ada", last: "King Lovelace", country: "unknown", notes: ["met at the lab", "second note"] });
      expect(c1?.historyEvents?.map((h) => [h.domainEvtName, JSON.parse(h.domainEvtData)])).toEqual([
        ["ContactAdded", { first: "Ada", last: "King Lovelace", country: "unknown" }],
        ["NoteAdded", { text: "met at the lab" }],
        ["NoteAdded", { text: "second note" }],
      ]);
      // restore from zero
      await f3.runtime.controlEventHandler({ eventHandlerName: "Seen", action: "restore", restoreFromZero: true });
      const restored = await seen.getModel("c2");
      expect(restored?.model).toEqual({ first: "Alan", last: "", country: "unknown", notes: [] });
    } finally {
      await f3.stop();
      await f1.stop();
    }
  });

  it("an upcaster that throws or returns a non-JSON-safe payload is UPCAST_FAILED, and nothing stored changes", async () => {
    for (const bad of ["throws", "nan"] as const) {
      const stores = placeOf();
      const f1 = await written(stores);
      const r3 = release3({ badUpcaster: bad });
      const f3 = createFacade({ appName: "release-3-bad", ...stores() }).registerDomain(r3.D);
      await f3.start();
      try {
        const e = await rejection(f3.loadAggregate(r3.Contact, "c2"));
        expect(e.code).toBe("UPCAST_FAILED");
        expect(e.message).toMatch(
          bad === "throws" ? /version 1 to 2 threw: cannot split this name/ : /version 2 to 3 .*not JSON-safe at \/country/,
        );
        const viaCommand = await rejection(f3.dispatch(r3.Note, { contactUuid: "c2", text: "x" }, { reqCtx: alice }));
        expect(viaCommand.code).toBe("UPCAST_FAILED");
        const raw = (f3.eventRepository as unknown as { stored: EventRepository }).stored;
        expect((await raw.loadAggregate("c2")).map((e) => e.payload)).toEqual([{ name: "Alan" }]);
        expect(await raw.headPosition()).toBe(3);
      } finally {
        await f3.stop();
        await f1.stop();
      }
    }
  });

  it("an event written by a newer release is UPCAST_FAILED for the older one, naming both versions", async () => {
    const stores = placeOf();
    const r3 = release3();
    const f3 = createFacade({ appName: "release-3", ...stores() }).registerDomain(r3.D);
    await f3.start();
    await f3.dispatch(r3.Add, { contactUuid: "c9", first: "Grace", last: "Hopper", country: "US" }, { reqCtx: alice });
    const r1 = release1();
    const f1 = createFacade({ appName: "release-1", ...stores() }).registerDomain(r1.D);
    await f1.start();
    try {
      // Release 1 registers ContactAdded at version 1 and reads version 3: refused, not misread.
      const upcasting = release1Typed(r1);
      const e = await rejection(f1.loadAggregate(upcasting, "c9"));
      expect(e).toBeInstanceOf(MnemeError);
      expect(e.code).toBe("UPCAST_FAILED");
      expect(e.message).toMatch(/written by a newer release: Contacts.ContactAdded is registered at version 1/);
    } finally {
      await f1.stop();
      await f3.stop();
    }
  });
});

/** Release 1's aggregate token (the domain keeps it; release1() does not return it). */
function release1Typed(r1: ReturnType<typeof release1>) {
  return r1.D.aggregates.get("Contact")!;
}

describe("event versions at definition", () => {
  it("refuses a gap in the upcaster chain, an upcaster for no older version, a bad version and a taken former name", () => {
    const D = defineDomain("Defs");
    const code = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        return (e as MnemeError).code + ": " + (e as Error).message;
      }
      return "no error";
    };
    expect(code(() => D.event("A", { version: 3, upcasters: { 1: (p: unknown) => p } }))).toMatch(
      /^INVALID_DOMAIN: .*needs an upcaster from version 2 to 3/,
    );
    expect(code(() => D.event("B", { version: 2, upcasters: { 1: (p: unknown) => p, 2: (p: unknown) => p } }))).toMatch(
      /^INVALID_DOMAIN: .*upcasters\["2"\] names no older version/,
    );
    expect(code(() => D.event("C", { version: 0 }))).toMatch(/^INVALID_DOMAIN: .*version must be an integer >= 1/);
    expect(code(() => D.event("E", { version: 2, upcasters: { 1: "nope" as never } }))).toMatch(/^INVALID_DOMAIN: .*must be a function/);
    D.event("Taken");
    expect(code(() => D.event("F", { renamedFrom: "Taken" }))).toMatch(/^INVALID_DOMAIN: .*names an event of Defs already/);
    D.event("G", { renamedFrom: ["Old"] });
    expect(code(() => D.event("Old"))).toMatch(/^INVALID_DOMAIN: .*former name/);
    expect(D.event("H", { version: 2, upcasters: { 1: (p: unknown) => p } }).version).toBe(2);
  });
});
