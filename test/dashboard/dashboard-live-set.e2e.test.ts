/**
 * The dashboard's live-query client (dashboard/src/live-query.ts, `LiveSet`)
 * against a real server (Notes world, node:http on 127.0.0.1): queries
 * followed in one turn share one stream, results reach each query's
 * callback, a refused query is reported once and leaves the set while the
 * others go on, following another query reopens the stream with every query
 * answered again, a dropped connection reconnects, and a session that ends
 * is reported as such.
 */
import { createServer } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Facade, newUuid } from "mneme";
import { createHttpHandler, toNodeListener } from "mneme/http";
import type { Api, ApiError } from "../../dashboard/src/api.js";
import { LiveSet } from "../../dashboard/src/live-query.js";
import { listenLocal } from "../support/http-fixture.js";
import { AddNote, type NotesUser, TENANT_A, newUser, notesResolver, revoke, startNotes } from "../support/notes-world.js";

let facade: Facade;
let srv: { url: string; close(): Promise<void> };
let server: ReturnType<typeof createServer>;
const closers: (() => void)[] = [];

beforeAll(async () => {
  facade = await startNotes();
  const listener = toNodeListener(createHttpHandler(facade, { resolveCredentials: notesResolver, sse: { retryMs: 100 } }));
  server = createServer((req, res) => void listener(req, res));
  srv = await listenLocal(server);
});
afterAll(async () => {
  for (const c of closers) c();
  await srv.close();
  await facade.stop();
});

/** The few members of Api a LiveSet uses, for a user of tenant A. */
function apiOf(user: NotesUser, ended: string[]): Api {
  return {
    url: (path: string) => new URL(path, `${srv.url}/`),
    tenantPath: () => `api/tenants/${TENANT_A}`,
    headers: () => user.headers,
    onSessionEnded: (detail: string) => ended.push(detail),
  } as unknown as Api;
}

const addNote = (user: NotesUser, text: string) =>
  facade.dispatch(
    AddNote,
    { noteUuid: newUuid(), text, author: "x", personUuid: newUuid() },
    { reqCtx: { ...user.reqCtx, targetTenantUuid: TENANT_A } },
  );

async function until(fn: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 20_000;
  while (!fn()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("LiveSet (the dashboard's live queries on one stream)", () => {
  it("one stream for the queries of a turn, refusals per query, a reopening answers all again, a drop reconnects, an ended session is told", async () => {
    const ann = newUser("ann", TENANT_A);
    const ended: string[] = [];
    const set = new LiveSet(apiOf(ann, ended));
    closers.push(() => set.stop());
    const counts: number[] = [];
    const lists: string[][] = [];
    const refused: ApiError[] = [];
    set.follow<{ count: number }>(
      "count",
      "Notes",
      "CountNotes",
      {},
      {
        onResult: (r) => counts.push(r.count),
        onRefused: (e) => refused.push(e),
      },
    );
    set.follow<{ texts: string[] }>(
      "list",
      "Notes",
      "ListNotes",
      {},
      {
        onResult: (r) => lists.push(r.texts),
        onRefused: (e) => refused.push(e),
      },
    );
    set.follow("plain", "Notes", "GetNoteCount", {}, { onResult: () => undefined, onRefused: (e) => refused.push(e) });
    await until(() => counts.length === 1 && lists.length === 1 && refused.length === 1, "the first results");
    expect(set.opened).toBe(1);
    expect(refused[0]).toMatchObject({ status: 400, code: "INVALID_REQUEST" });
    expect(set.has("plain")).toBe(false);

    await addNote(ann, "one");
    await until(() => counts.at(-1) === 1 && lists.at(-1)?.length === 1, "the change");

    // Another query: the stream opens again, and every query is answered again.
    const before = counts.length;
    const stopPrefix = set.follow<{ texts: string[] }>(
      "prefixed",
      "Notes",
      "ListNotes",
      { prefix: "t" },
      {
        onResult: () => undefined,
        onRefused: (e) => refused.push(e),
      },
    );
    await until(() => counts.length === before + 1, "the reopening");
    expect(set.opened).toBe(2);
    stopPrefix();

    // A dropped connection: opened again after retry, the change made meanwhile shown.
    const opened = set.opened;
    const troubles: ApiError[] = [];
    set.follow<{ count: number }>(
      "count",
      "Notes",
      "CountNotes",
      {},
      {
        onResult: (r) => counts.push(r.count),
        onRefused: (e) => refused.push(e),
        onTrouble: (e) => troubles.push(e),
      },
    );
    await until(() => set.opened === opened + 1, "the reopening with the new callbacks");
    server.closeAllConnections();
    await until(() => troubles.length >= 1, "the drop");
    await addNote(ann, "two");
    await until(() => counts.at(-1) === 2, "the second change");
    expect(set.opened).toBeGreaterThanOrEqual(opened + 2);

    // The session ends: each query is refused with 401, and the page is told the session ended.
    revoke(ann);
    await addNote(newUser("amy", TENANT_A), "three");
    await until(() => refused.filter((e) => e.status === 401).length === 2, "the refusals");
    expect(ended.length).toBeGreaterThanOrEqual(1);
    expect(set.has("count") || set.has("list")).toBe(false);
  });
});
