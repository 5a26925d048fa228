/**
 * Event subscriptions over HTTP (`GET {t}/events/stream`): resume across a
 * restart of the app on a SQLite file and after a client is killed mid-burst
 * (no event lost, none twice), tenant and per-type permission isolation,
 * personal data as the Runtime shows it (erased after forget), gaps for ids
 * that cannot be continued, and a subscriber on one Postgres instance seeing
 * events another instance appended.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type Facade, newUuid } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { createPostgresBackends } from "mneme/postgres";
import { listenLocal, nodeListenerFor, HTTP_PATHS } from "../support/http-fixture.js";
import { createServer } from "node:http";
import { createHttpHandler, type HttpHandlerOptions } from "mneme/http";
import {
  ADMIN,
  AddNote,
  NoteAdded,
  type NotesUser,
  StreamClient,
  TENANT_A,
  TENANT_B,
  newUser,
  notesResolver,
  revoke,
  startNotes,
} from "../support/notes-world.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";

const files = sqliteScratch("subscriptions");
const pg = postgresScratch("subs");

const USER_A = newUser("ann", TENANT_A);
const USER_B = newUser("bob", TENANT_B);

interface Served {
  url: string;
  close(): Promise<void>;
}

async function serve(facade: Facade, path: (typeof HTTP_PATHS)[number] = "direct", options: HttpHandlerOptions = {}): Promise<Served> {
  const handler = createHttpHandler(facade, { resolveCredentials: notesResolver, ...options });
  const listener = nodeListenerFor(handler, path);
  return listenLocal(createServer((req, res) => void listener(req, res)));
}

function addNote(facade: Facade, tenant: string, text: string, personUuid = newUuid()) {
  const user = tenant === TENANT_A ? USER_A : USER_B;
  return facade.dispatch(
    AddNote,
    { noteUuid: newUuid(), text, author: `author of ${text}`, personUuid },
    {
      reqCtx: { ...user.reqCtx, targetTenantUuid: tenant },
    },
  );
}

/** The positions of every stored NoteAdded of `tenant`, as the store has them. */
async function storedPositions(facade: Facade, tenant: string): Promise<number[]> {
  const out: number[] = [];
  for await (const page of facade.eventRepository.readAll({ tenantUuid: tenant, eventPaths: [NoteAdded.path] })) {
    for (const e of page) out.push(e.position);
  }
  return out;
}

const streamUrl = (base: string, tenant: string, query: string) => `${base}/api/tenants/${tenant}/events/stream?${query}`;

describe("event subscriptions over HTTP", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });
  const open = async (url: string, user: NotesUser, extra: Record<string, string> = {}) => {
    const c = await StreamClient.open(url, { ...user.headers, ...extra });
    cleanups.push(() => c.close());
    return c;
  };

  describe.each(HTTP_PATHS)("%s path", (httpPath) => {
    it("resumes across a restart of the app (SQLite file) from Last-Event-ID: every event once, in order", async () => {
      const filename = files.newFile();
      const first = files.keep(await startNotes(createSqliteBackends({ filename })));
      const srv1 = await serve(first, httpPath);
      for (let i = 0; i < 5; i++) await addNote(first, TENANT_A, `before ${i}`);
      const c1 = await open(streamUrl(srv1.url, TENANT_A, `types=${NoteAdded.path}&after=0`), USER_A);
      await c1.until((c) => c.messages.length >= 5);
      for (let i = 0; i < 3; i++) await addNote(first, TENANT_A, `live ${i}`);
      await c1.until((c) => c.messages.length >= 8);
      const lastSeen = c1.lastEventId!;
      await c1.close();
      // Appended while nobody listens, then the app goes down.
      for (let i = 0; i < 4; i++) await addNote(first, TENANT_A, `missed ${i}`);
      await srv1.close();
      await first.stop();

      const second = files.keep(await startNotes(createSqliteBackends({ filename })));
      const srv2 = await serve(second, httpPath);
      cleanups.push(() => srv2.close());
      for (let i = 0; i < 2; i++) await addNote(second, TENANT_A, `after ${i}`);
      // The URL still says after=0: an EventSource's reconnect sends Last-Event-ID, which wins.
      const c2 = await open(streamUrl(srv2.url, TENANT_A, `types=${NoteAdded.path}&after=0`), USER_A, {
        "last-event-id": String(lastSeen),
      });
      await c2.until((c) => c.messages.length >= 6);
      await addNote(second, TENANT_A, "live after restart");
      await c2.until((c) => c.messages.length >= 7);
      const all = await storedPositions(second, TENANT_A);
      expect(all).toHaveLength(15);
      const seen = [...c1.messages, ...c2.messages].map((m) => m.id);
      expect(seen).toEqual(all);
      expect(c2.blocks.some((b) => b.event === "gap")).toBe(false);
      for (const m of [...c1.messages, ...c2.messages]) {
        expect(m.data.position).toBe(m.id);
        expect(m.data).toMatchObject({ domain: "Notes", name: "NoteAdded", tenantUuid: TENANT_A });
        expect(m.data.reqCtx).toBeUndefined();
      }
    });

    it("a client killed in the middle of a burst resumes from its Last-Event-ID with nothing lost and nothing twice", async () => {
      const facade = await startNotes(createSqliteBackends({ filename: files.newFile() }));
      files.keep(facade);
      const srv = await serve(facade, httpPath);
      cleanups.push(() => srv.close());
      const url = streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}`);
      const c1 = await open(url, USER_A);
      await c1.until((c) => c.lastEventId !== undefined);
      const burst = (async () => {
        for (let i = 0; i < 60; i++) await Promise.all([addNote(facade, TENANT_A, `a${i}`), addNote(facade, TENANT_B, `b${i}`)]);
      })();
      await c1.until((c) => c.messages.length >= 10);
      await c1.close(); // killed mid-burst: whatever was in flight is lost to it
      const lastSeen = c1.lastEventId!;
      const c2 = await open(url, USER_A, { "last-event-id": String(lastSeen) });
      await burst;
      await c2.until((x) => c1.messages.length + x.messages.length >= 60);
      const seen = [...c1.messages, ...c2.messages].map((m) => m.id);
      expect(seen).toEqual(await storedPositions(facade, TENANT_A));
      expect(new Set(seen).size).toBe(60);
    });
  });

  it("a client that stops reading is cut off past sse.maxQueuedEvents and resumes with nothing lost", { timeout: 60_000 }, async () => {
    const facade = files.keep(await startNotes());
    const srv = await serve(facade, "direct", { sse: { maxQueuedEvents: 20 } });
    cleanups.push(() => srv.close());
    const res = await fetch(streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}&after=0`), { headers: USER_A.headers });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    // Big events, so the sockets' buffers fill and the server has to hold events for this client.
    const big = "x".repeat(64 * 1024);
    for (let i = 0; i < 200; i++) await addNote(facade, TENANT_A, `${String(i).padStart(3, "0")} ${big}`);
    // Now read: what was written before the cut, then the end of the stream (the server closed it).
    let text = "";
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const firstIds = [...text.matchAll(/^id: (\d+)\ndata: /gm)].map((m) => Number(m[1]));
    expect(firstIds.length).toBeGreaterThan(0);
    expect(firstIds.length).toBeLessThan(200);
    const c2 = await open(streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}`), USER_A, { "last-event-id": String(firstIds.at(-1)) });
    await c2.until((c) => firstIds.length + c.messages.length >= 200);
    expect([...firstIds, ...c2.messages.map((m) => m.id)]).toEqual(await storedPositions(facade, TENANT_A));
  });

  it("shows only the path tenant's events and the permitted types; allTenants only to administrators", async () => {
    const facade = files.keep(await startNotes());
    const srv = await serve(facade);
    cleanups.push(() => srv.close());
    const a = await open(streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}&after=0`), USER_A);
    const b = await open(streamUrl(srv.url, TENANT_B, `types=${NoteAdded.path}&after=0`), USER_B);
    const all = await open(streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}&after=0&allTenants=true`), ADMIN);
    for (let i = 0; i < 10; i++) await addNote(facade, i % 2 === 0 ? TENANT_A : TENANT_B, `n${i}`);
    await a.until((c) => c.messages.length >= 5);
    await b.until((c) => c.messages.length >= 5);
    await all.until((c) => c.messages.length >= 10);
    expect(a.messages.every((m) => m.data.tenantUuid === TENANT_A)).toBe(true);
    expect(b.messages.every((m) => m.data.tenantUuid === TENANT_B)).toBe(true);

    // Another tenant's stream, another tenant's all-tenant view, a forbidden type, an unsubscribable type, no session.
    const refused = [
      [streamUrl(srv.url, TENANT_B, `types=${NoteAdded.path}`), USER_A, 403],
      [streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}&allTenants=true`), USER_A, 403],
      [streamUrl(srv.url, TENANT_A, "types=Notes.NoteFlagged"), USER_A, 403],
      [streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path},Notes.NoteFlagged`), USER_A, 403],
      [streamUrl(srv.url, TENANT_A, "types=Notes.NoteArchived"), ADMIN, 403],
      [streamUrl(srv.url, TENANT_A, "types=Notes.NoSuchEvent"), USER_A, 400],
      [streamUrl(srv.url, TENANT_A, ""), USER_A, 400],
      [streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}&after=-1`), USER_A, 400],
    ] as const;
    for (const [url, user, status] of refused) {
      const c = await StreamClient.open(url, user.headers);
      expect({ url, status: c.status }).toEqual({ url, status });
    }
    const anonymous = await StreamClient.open(streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}`), {});
    expect(anonymous.status).toBe(401);
    // The administrator's custom permission lets it see NoteFlagged.
    const admin = await open(streamUrl(srv.url, TENANT_A, "types=Notes.NoteFlagged"), ADMIN);
    expect(admin.status).toBe(200);
  });

  it("shows personal fields as the Runtime does: clear while the key lives, [erased] after forget", async () => {
    const facade = files.keep(await startNotes(createSqliteBackends({ filename: files.newFile() })));
    const srv = await serve(facade);
    cleanups.push(() => srv.close());
    const person = newUuid();
    await addNote(facade, TENANT_A, "kept", person);
    const url = streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}&after=0`);
    const before = await open(url, USER_A);
    await before.until((c) => c.messages.length >= 1);
    expect(before.messages[0]!.data.payload.author).toBe("author of kept");
    await facade.forget(person);
    const after = await open(url, USER_A);
    await after.until((c) => c.messages.length >= 1);
    expect(after.messages[0]!.data.payload).toMatchObject({ author: "[erased]", text: "kept" });
  });

  it("an id that is no position, or one past the head, starts with event: gap and goes on live", async () => {
    const facade = files.keep(await startNotes());
    const srv = await serve(facade);
    cleanups.push(() => srv.close());
    await addNote(facade, TENANT_A, "old");
    const url = streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}`);
    for (const id of ["abc", "999999"]) {
      const c = await open(url, USER_A, { "last-event-id": id });
      await c.until((x) => x.blocks.length >= 1);
      expect(c.blocks[0]).toMatchObject({
        event: "gap",
        id: 1,
        data: { lastEventId: id === "abc" ? "abc" : 999999, reason: "unknown-id" },
      });
    }
    const c = await open(url, USER_A, { "last-event-id": "abc" });
    await c.until((x) => x.blocks.length >= 1);
    await addNote(facade, TENANT_A, "new");
    await c.until((x) => x.messages.length >= 1);
    expect(c.messages.map((m) => m.data.payload.text)).toEqual(["new"]);
  });

  it("a revoked session ends the stream at the next re-check", { timeout: 20_000 }, async () => {
    const facade = files.keep(await startNotes());
    const srv = await serve(facade);
    cleanups.push(() => srv.close());
    const carol = newUser("carol", TENANT_A);
    const c = await open(streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}`), carol);
    await c.until((x) => x.lastEventId !== undefined);
    revoke(carol);
    await c.finished;
    expect(c.ended).toBe(true);
  });

  it("Postgres: a subscriber of one instance gets, in order, the events another instance appends", async () => {
    const schema = pg.newSchema();
    const one = files.keep(await startNotes(createPostgresBackends({ connectionString: DATABASE_URL, schema })));
    const two = files.keep(await startNotes(createPostgresBackends({ connectionString: DATABASE_URL, schema })));
    const srv = await serve(one);
    cleanups.push(() => srv.close());
    for (let i = 0; i < 3; i++) await addNote(one, TENANT_A, `one ${i}`);
    const c = await open(streamUrl(srv.url, TENANT_A, `types=${NoteAdded.path}&after=0`), USER_A);
    await c.until((x) => x.messages.length >= 3);
    await Promise.all(Array.from({ length: 20 }, (_, i) => addNote(i % 2 === 0 ? two : one, i % 3 === 0 ? TENANT_B : TENANT_A, `x ${i}`)));
    const expected = await storedPositions(one, TENANT_A);
    await c.until((x) => x.messages.length >= expected.length);
    expect(c.messages.map((m) => m.id)).toEqual(expected);
  });
});
