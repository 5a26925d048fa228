/**
 * Commands that declare personal data, on memory, SQLite and Postgres: the
 * handler gets the clear payload; the CommandStore record keeps the fields
 * sealed (never in clear), every listing opens them, and after `forget` they
 * read "[erased]"; idempotent replays still match before and after the
 * forget; a payload without its subject is VALIDATION_FAILED with nothing
 * written in clear; a scheduled command whose subject was forgotten is
 * dead-lettered when due, not sent, and its retry refused; a broker
 * consumer's dead letter keeps body and payload sealed under the command's
 * subject (opened for listing and retry, refused after forget). Also the
 * definition checks and the start-up warning MNEME_PERSONAL_DATA_UNDECLARED.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createFacade, defineDomain, type Facade, newUuid, registerStorePermissions } from "mneme";
import { registerDefaults } from "mneme/defaults";
import { ProcessManager } from "mneme/reactions";
import { ListDeadLetters } from "mneme/runtime";
import { PERSONAL_DATA_UNDECLARED_WARNING } from "../../src/privacy/undeclared-fields.js";
import { rejection } from "../support/rejections.js";
import { sharedPlaces } from "../support/shared-places.js";
import { HandTransport } from "../support/hand-transport.js";
import { IntegrationConsumer, type InboundEntry } from "../../src/integration/integration-consumer.js";
import type { CommandOptions } from "mneme/types";

const reqCtx = { senderAccountUuid: "acc", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t" };
/** Lets the store reads of these tests through (they are about what the reads show, not who may read). */
const allowAll = (): undefined => undefined;
const EMAIL = "member.cmd.secret@example.org";

interface LendBook {
  bookUuid: string;
  memberUuid: string;
  memberEmail: string;
  address: { street: string; city: string };
}

/** `shelf.locked` makes LendBook fail (a broker consumer's dead letter). */
function library(seen: LendBook[], shelf = { locked: false }) {
  const D = defineDomain("Library");
  const Lent = D.event<{ bookUuid: string; memberUuid: string }>("BookLent");
  const Lend = D.command<LendBook>("LendBook", {
    personalData: { subject: (p) => p.memberUuid, fields: ["memberEmail", "/address/street"] },
  });
  D.handleCommand(Lend, (_c, _e, p) => {
    if (shelf.locked) throw new Error("the shelf is locked");
    seen.push(p);
    return [Lent.create(p.bookUuid, { bookUuid: p.bookUuid, memberUuid: p.memberUuid })];
  });
  const Remind = D.command<{ memberUuid: string; email: string }>("Remind", {
    personalData: { subject: (p) => p.memberUuid, fields: ["email"] },
  });
  const reminded: unknown[] = [];
  D.handleCommand(Remind, (_c, _e, p) => {
    reminded.push(p);
  });
  const Note = D.command<{ memberUuid: string; email: string }>("Note");
  D.handleCommand(Note, () => undefined);
  return { D, Lent, Lend, Remind, Note, reminded };
}

const lend = (over: Partial<LendBook> = {}): LendBook => ({
  bookUuid: "book-1",
  memberUuid: "member-1",
  memberEmail: EMAIL,
  address: { street: "12 Secret Street", city: "Openville" },
  ...over,
});

const facades: Facade[] = [];
afterEach(async () => {
  for (const f of facades.splice(0)) await f.stop();
});

describe.each(sharedPlaces("privacy_cmd"))("command personal data on %s", (_name, place) => {
  it("is sealed in the record, clear for the handler and the listings, erased after forget; replays still match", async () => {
    const stores = place();
    const seen: LendBook[] = [];
    const lib = library(seen);
    const f = createFacade({ appName: "cmd-privacy", ...stores(), authorizer: allowAll });
    facades.push(f);
    f.registerDomain(lib.D);
    registerStorePermissions(f);
    await f.start();
    const commandUuid = newUuid();
    const first = await f.dispatch(lib.Lend, lend(), { reqCtx, commandUuid });
    expect(seen).toEqual([lend()]);

    const raw = await f.commandStore.get(commandUuid);
    const rawText = JSON.stringify(raw);
    expect(rawText).not.toContain(EMAIL);
    expect(rawText).not.toContain("12 Secret Street");
    expect(rawText).toContain("Openville");
    expect((raw?.payload as { memberEmail: unknown }).memberEmail).toMatchObject({ $enc: expect.stringMatching(/^v1:/) });
    const listed = await f.runtime.stores.read("command", reqCtx);
    expect(listed.items.map((r) => (r as { payload: unknown }).payload)).toEqual([lend()]);

    // A retry is the same request, though each seal has its own IV; another payload under the uuid is not.
    const again = await f.dispatch(lib.Lend, lend(), { reqCtx, commandUuid });
    expect(again.replayed).toBe(true);
    expect(again.events.map((e) => e.eventUuid)).toEqual(first.events.map((e) => e.eventUuid));
    expect((await rejection(f.dispatch(lib.Lend, lend({ memberEmail: "other@example.org" }), { reqCtx, commandUuid }))).code).toBe(
      "CONFLICT",
    );
    expect(seen).toHaveLength(1);

    expect(await f.forget("member-1")).toEqual({ keysDeleted: 1 });
    const erased = await f.runtime.stores.read("command", reqCtx);
    expect(erased.items.map((r) => (r as { payload: unknown }).payload)).toEqual([
      lend({ memberEmail: "[erased]", address: { street: "[erased]", city: "Openville" } }),
    ]);
    // The caller's retry after the forget still replays (the erased fields are not held against it).
    expect((await f.dispatch(lib.Lend, lend(), { reqCtx, commandUuid })).replayed).toBe(true);
    expect(seen).toHaveLength(1);

    // A second instance on the same stores reads the record erased too.
    const g = createFacade({ appName: "cmd-privacy", ...stores(), authorizer: allowAll });
    facades.push(g);
    g.registerDomain(library([]).D);
    registerStorePermissions(g);
    await g.start();
    const onG = await g.runtime.stores.read("command", reqCtx);
    expect(JSON.stringify(onG.items)).not.toContain(EMAIL);
    expect(JSON.stringify(onG.items)).toContain("[erased]");
  });

  it("keeps in the record what an outbox sealed (storedPayload), and replays its retries before and after forget", async () => {
    const lib = library([]);
    const f = createFacade({ appName: "cmd-privacy", ...place()() });
    facades.push(f);
    f.registerDomain(lib.D);
    await f.start();
    const clear = { memberUuid: "member-3", email: EMAIL };
    const stored = { memberUuid: "member-3", email: f.personalData.seal(EMAIL, await f.personalData.liveKey("member-3")) };
    const commandUuid = newUuid();
    await f.dispatch(lib.Note, clear, { reqCtx, commandUuid, storedPayload: stored });
    expect(JSON.stringify(await f.commandStore.get(commandUuid))).not.toContain(EMAIL);
    expect((await f.dispatch(lib.Note, clear, { reqCtx, commandUuid, storedPayload: stored })).replayed).toBe(true);
    await f.forget("member-3");
    expect((await f.dispatch(lib.Note, clear, { reqCtx, commandUuid, storedPayload: stored })).replayed).toBe(true);
    const other = { memberUuid: "member-4", email: EMAIL };
    expect((await rejection(f.dispatch(lib.Note, other, { reqCtx, commandUuid }))).code).toBe("CONFLICT");
  });

  it("refuses a payload whose subject cannot be named (VALIDATION_FAILED) and records it without the clear values", async () => {
    const seen: LendBook[] = [];
    const lib = library(seen);
    const f = createFacade({ appName: "cmd-privacy", ...place()() });
    facades.push(f);
    f.registerDomain(lib.D);
    await f.start();
    const commandUuid = newUuid();
    const err = await rejection(f.dispatch(lib.Lend, lend({ memberUuid: "" }), { reqCtx, commandUuid }));
    expect(err.code).toBe("VALIDATION_FAILED");
    expect(err.message).toContain("personalData.subject");
    expect(seen).toEqual([]);
    expect(await f.eventRepository.headPosition()).toBe(0);
    const rec = await f.commandStore.get(commandUuid);
    expect(rec?.status).toBe("failed");
    expect(rec?.payload).toEqual(lend({ memberUuid: "", memberEmail: "[redacted]", address: { street: "[redacted]", city: "Openville" } }));
  });

  it("dead-letters a scheduled command whose subject was forgotten before it was due, and does not send it", async () => {
    const lib = library([]);
    const f = createFacade({ appName: "cmd-privacy", ...place()() });
    facades.push(f);
    f.registerDomain(lib.D);
    let now = Date.now();
    const pm = new ProcessManager<object>(f, {
      name: "Reminders",
      domain: "Library",
      initialState: () => ({}),
      clock: () => now,
      pollMs: 10_000,
    }).on(lib.Lent, (ctx, s, p) => {
      ctx.schedule(lib.Remind, { memberUuid: p.memberUuid, email: EMAIL }, { at: now + 60_000 });
      ctx.schedule(lib.Remind, { memberUuid: "member-2", email: "kept@example.org" }, { at: now + 60_000 });
      return s;
    });
    f.registerReadmodel(pm);
    await f.start();
    await f.dispatch(lib.Lend, lend(), { reqCtx, waitToFinish: true });
    const stored = await pm.outbox.list();
    expect(stored.map((e) => e.command?.payload)).toEqual([
      { memberUuid: "member-1", email: EMAIL },
      { memberUuid: "member-2", email: "kept@example.org" },
    ]);
    await f.forget("member-1");
    now += 61_000;
    await pm.outbox.drain();
    expect(lib.reminded).toEqual([{ memberUuid: "member-2", email: "kept@example.org" }]);
    const dead = await f.query(ListDeadLetters, {}, { reqCtx });
    expect(dead).toHaveLength(1);
    expect(dead[0]?.target).toBe("Library.Remind");
    expect(dead[0]?.lastError).toMatch(/not sent: 1 of its personal values were erased/);
    expect((await pm.outbox.get(dead[0]!.id))?.command?.payload).toEqual({ memberUuid: "member-1", email: "[erased]" });
    // A retry would meet the same erased values: refused, never sent.
    const refused = await rejection(f.runtime.controlDeadLetter({ action: "retry", id: dead[0]!.id }));
    expect(refused.code).toBe("INVALID_STATE");
    expect(refused.message).toMatch(/1 of its personal values were erased/);
    await pm.outbox.drain();
    expect(lib.reminded).toHaveLength(1);
    expect(await f.query(ListDeadLetters, {}, { reqCtx })).toHaveLength(1);
  });

  it("seals a broker consumer's dead letter under the command's subject: opened for listing and retry, refused and erased after forget", async () => {
    const stores = place();
    const seen: LendBook[] = [];
    const shelf = { locked: true };
    const lib = library(seen, shelf);
    const f = createFacade({ appName: "cmd-privacy", ...stores() });
    facades.push(f);
    f.registerDomain(lib.D);
    const transport = new HandTransport();
    const consumer = new IntegrationConsumer(f, {
      name: "LendIn",
      domain: "Library",
      transport,
      retry: { maxAttempts: 1 },
      toCommand: (m) => {
        if ((m.body as { unmapped?: boolean }).unmapped === true) throw new Error("no mapping");
        return { command: lib.Lend, payload: m.body as LendBook, reqCtx };
      },
    });
    f.registerReadmodel(consumer);
    await f.start();
    await transport.opened;
    const raw = consumer.readmodelStoreBackend.collection<Record<string, unknown>>("LendIn~outbox");
    const other = "other.member.secret@example.org";
    const second = lend({ bookUuid: "book-2", memberUuid: "member-2", memberEmail: other });
    await transport.deliver("m-1", lend());
    await transport.deliver("m-2", second);
    const [id1, id2] = [consumer.commandUuidOf("m-1"), consumer.commandUuidOf("m-2")];

    // Stored sealed: neither the body nor the payload's personal fields in clear.
    const stored = await raw.get(id1);
    expect(stored?.status).toBe("dead");
    const text = JSON.stringify(await raw.list({}));
    for (const secret of [EMAIL, other, "12 Secret Street"]) expect(text).not.toContain(secret);
    expect((stored?.message as { body: unknown }).body).toMatchObject({ $enc: expect.stringMatching(/^v1:/) });
    expect((stored?.command as { payload: { address: unknown } }).payload.address).toMatchObject({ city: "Openville" });

    // Opened for the listing; a retry before the forget maps the opened body and dispatches it.
    const listed = (await consumer.outbox.get(id1)) as InboundEntry | undefined;
    expect(JSON.parse(listed?.message.body as string)).toEqual(lend());
    expect(listed?.command?.payload).toEqual(lend());
    expect((await f.runtime.listDeadLetters({ eventHandlerName: "LendIn" })).map((e) => e.id).sort()).toEqual([id1, id2].sort());
    shelf.locked = false;
    await f.runtime.controlDeadLetter({ action: "retry", id: id1 });
    await consumer.outbox.drain();
    expect(seen).toEqual([lend()]);
    expect(await raw.get(id1)).toBeUndefined();

    // After the forget: the listing reads "[erased]", a retry is refused, no clear value is left.
    expect(await f.forget("member-2")).toEqual({ keysDeleted: 1 });
    const erased = (await consumer.outbox.get(id2)) as InboundEntry | undefined;
    expect(erased?.message.body).toBe("[erased]");
    expect((erased?.command?.payload as LendBook).memberEmail).toBe("[erased]");
    const refused = await rejection(f.runtime.controlDeadLetter({ action: "retry", id: id2 }));
    expect(refused.code).toBe("INVALID_STATE");
    expect(refused.message).toMatch(/personal values were erased/);
    await consumer.outbox.drain();
    expect(seen).toHaveLength(1);
    expect((await raw.get(id2))?.status).toBe("dead");
    expect(JSON.stringify(await raw.list({}))).not.toContain(other);

    // A retry accepted before the forget and sent after it: the erased body is not mapped, the entry is dead again.
    shelf.locked = true;
    await transport.deliver("m-4", lend({ bookUuid: "book-4", memberUuid: "member-4" }));
    const id4 = consumer.commandUuidOf("m-4");
    shelf.locked = false;
    await f.runtime.controlEventHandler({ action: "stop", eventHandlerName: "LendIn" });
    await f.runtime.controlDeadLetter({ action: "retry", id: id4 });
    expect((await raw.get(id4))?.status).toBe("pending");
    await f.forget("member-4");
    await f.runtime.controlEventHandler({ action: "start", eventHandlerName: "LendIn" });
    await vi.waitFor(async () => expect((await raw.get(id4))?.status).toBe("dead"), { timeout: 10_000 });
    expect((await raw.get(id4))?.lastError).toMatch(/its body was erased/);
    expect(seen).toHaveLength(1);

    // A message whose mapping failed names no subject: its body is kept as it came (documented).
    await transport.deliver("m-3", { unmapped: true });
    expect(((await raw.get(consumer.commandUuidOf("m-3")))?.message as { body: unknown }).body).toBe('{"unmapped":true}');
  });
});

describe("declaring command personal data", () => {
  it("checks the declaration like an event's (INVALID_DOMAIN) and carries the fields as pointers", () => {
    const D = defineDomain("Decl");
    const ok = D.command<{ who: string; email: string }>("Ok", { personalData: { subject: (p) => p.who, fields: ["email", "/a~1b"] } });
    expect(ok.personalData?.fields).toEqual(["/email", "/a~1b"]);
    for (const bad of [{ fields: ["email"] }, { subject: () => "x", fields: [] }, { subject: () => "x", fields: ["/a", "/a/b"] }]) {
      expect(() => D.command(`Bad${Math.random().toString(36).slice(2, 8)}`, { personalData: bad as never })).toThrow(
        expect.objectContaining({ code: "INVALID_DOMAIN" }),
      );
    }
  });
});

describe("the start-up warning MNEME_PERSONAL_DATA_UNDECLARED", () => {
  function warnings(run: () => Promise<void> | void): Promise<Error[]> {
    const got: Error[] = [];
    const listen = (w: Error): void => {
      if ((w as { code?: string }).code === PERSONAL_DATA_UNDECLARED_WARNING) got.push(w);
    };
    process.on("warning", listen);
    return (async () => {
      try {
        await run();
        // Warnings are emitted on the next tick.
        await new Promise((r) => setTimeout(r, 20));
        return got;
      } finally {
        process.off("warning", listen);
      }
    })();
  }

  function domainWith(command: CommandOptions<{ customerUuid: string }>) {
    const D = defineDomain(`Shop${Math.random().toString(36).slice(2, 8)}`);
    D.event<{ customerUuid: string; email: string; address: { street: string } }>("CustomerRegistered", {
      personalData: { subject: (p) => p.customerUuid, fields: ["email", "/address/street"] },
    });
    D.command<{ customerUuid: string }>("RegisterCustomer", {
      schema: {
        type: "object",
        properties: { customerUuid: { type: "string" }, email: { type: "string" }, street: { type: "string" } },
      },
      ...command,
    });
    return D;
  }

  it("names the command and its undeclared fields, and is logged at start", async () => {
    const f = createFacade({ appName: "warn" });
    facades.push(f);
    const D = domainWith({});
    const got = await warnings(() => {
      f.registerDomain(D);
    });
    expect(got).toHaveLength(1);
    expect(got[0]?.message).toContain(`${D.name}.RegisterCustomer (email, street)`);
    await f.start();
    const logged = await f.logStore.list({ level: "warn", source: "mneme.privacy" });
    expect(logged.items.map((e) => e.message)).toEqual([got[0]?.message]);
  });

  it("is not given when the fields are declared (personalData or secretFields), for a command without a schema, or for the built-in domains", async () => {
    const got = await warnings(async () => {
      createFacade().registerDomain(domainWith({ personalData: { subject: (p) => p.customerUuid, fields: ["email", "street"] } }));
      createFacade().registerDomain(domainWith({ secretFields: ["email", "street"] }));
      const noSchema = defineDomain("NoSchema");
      noSchema.event<{ id: string; email: string }>("Registered", { personalData: { subject: (p) => p.id, fields: ["email"] } });
      noSchema.command<{ id: string; email: string }>("Register");
      createFacade().registerDomain(noSchema);
      const f = createFacade({ appName: "defaults" });
      await registerDefaults(f, { admin: { email: "admin@example.org", password: "a-long-enough-password-1" } });
    });
    expect(got.map((w) => w.message)).toEqual([]);
  });
});
