/**
 * Live queries over HTTP (`GET {t}/queries/{domain}/{name}/live`): 100
 * concurrent subscribers of two tenants under a burst of writes all end at
 * the right result and never see the other tenant's data; subscribers of one
 * query, payload and scope share one evaluation per committed batch; a
 * revoked session ends the stream; refusals are the query's own; Postgres too.
 */
import { createServer } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { type Facade, authenticated, createFacade, defineDomain, newUuid } from "mneme";
import { createHttpHandler } from "mneme/http";
import { createPostgresBackends } from "mneme/postgres";
import { HTTP_PATHS, listenLocal, nodeListenerFor } from "../support/http-fixture.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import {
  ADMIN,
  AddNote,
  type NotesUser,
  StreamClient,
  TENANT_A,
  TENANT_B,
  TENANT_SYS,
  newUser,
  notesAuthorizer,
  notesResolver,
  queryRuns,
  registerNotes,
  revoke,
  startNotes,
} from "../support/notes-world.js";

const pg = postgresScratch("live");

async function serve(facade: Facade, path: (typeof HTTP_PATHS)[number] = "direct") {
  const listener = nodeListenerFor(createHttpHandler(facade, { resolveCredentials: notesResolver, sse: { maxConnections: 500 } }), path);
  return listenLocal(createServer((req, res) => void listener(req, res)));
}

const liveUrl = (base: string, tenant: string, name: string, payload?: unknown) =>
  `${base}/api/tenants/${tenant}/queries/Notes/${name}/live${payload === undefined ? "" : `?payload=${encodeURIComponent(JSON.stringify(payload))}`}`;

function addNote(facade: Facade, user: NotesUser, text: string) {
  return facade.dispatch(
    AddNote,
    { noteUuid: newUuid(), text, author: "someone", personUuid: newUuid() },
    { reqCtx: { ...user.reqCtx, targetTenantUuid: user.reqCtx.senderTenantUuid! } },
  );
}

describe("live queries over HTTP", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });
  async function setup(facade: Facade, path: (typeof HTTP_PATHS)[number] = "direct") {
    const srv = await serve(facade, path);
    cleanups.push(async () => {
      await srv.close();
      await facade.stop();
    });
    return srv;
  }
  async function open(url: string, user: NotesUser) {
    const c = await StreamClient.open(url, user.headers);
    cleanups.push(() => c.close());
    return c;
  }

  it(
    "100 subscribers in two tenants under a burst: each ends at its tenant's result, none sees the other's, evaluations are shared",
    { timeout: 60_000 },
    async () => {
      const facade = await startNotes();
      const srv = await setup(facade);
      const usersA = Array.from({ length: 5 }, (_, i) => newUser(`a${i}`, TENANT_A));
      const usersB = Array.from({ length: 5 }, (_, i) => newUser(`b${i}`, TENANT_B));
      await addNote(facade, usersA[0]!, "a-seed");
      // 60 CountNotes (shared per tenant: 2 groups) and 40 ListNotes (shared per sender: 10 groups).
      const subs = await Promise.all(
        Array.from({ length: 100 }, async (_, i) => {
          const user = i % 2 === 0 ? usersA[i % 5]! : usersB[i % 5]!;
          const query = i < 60 ? "CountNotes" : "ListNotes";
          const c = await open(
            liveUrl(srv.url, user.reqCtx.senderTenantUuid!, query, query === "ListNotes" ? { prefix: "" } : undefined),
            user,
          );
          return { c, user, query, tenant: user.reqCtx.senderTenantUuid! };
        }),
      );
      for (const s of subs) expect(s.c.status).toBe(200);
      await Promise.all(subs.map((s) => s.c.until((c) => c.messages.length >= 1)));
      for (const s of subs) {
        const first = s.c.messages[0]!.data;
        if (s.query === "CountNotes") expect(first).toEqual({ count: s.tenant === TENANT_A ? 1 : 0 });
        else expect(first).toEqual({ tenantUuid: s.tenant, texts: s.tenant === TENANT_A ? ["a-seed"] : [] });
      }

      let batches = 0;
      const off = facade.readmodelCommits.listen((b) => {
        if (b.eventHandlerName === "NoteProjection") batches++;
      });
      const runsBefore = queryRuns.count;
      await Promise.all([
        ...Array.from({ length: 30 }, (_, i) => addNote(facade, usersA[i % 5]!, `a${i}`)),
        ...Array.from({ length: 20 }, (_, i) => addNote(facade, usersB[i % 5]!, `b${i}`)),
      ]);
      const textsA = ["a-seed", ...Array.from({ length: 30 }, (_, i) => `a${i}`)].sort();
      const textsB = Array.from({ length: 20 }, (_, i) => `b${i}`).sort();
      await Promise.all(
        subs.map((s) =>
          s.c.until((c) => {
            const last = c.messages.at(-1)!.data;
            if (s.query === "CountNotes") return last.count === (s.tenant === TENANT_A ? 31 : 20);
            return JSON.stringify(last.texts) === JSON.stringify(s.tenant === TENANT_A ? textsA : textsB);
          }),
        ),
      );
      off();
      for (const s of subs) {
        for (const m of s.c.messages) {
          if (s.query === "ListNotes") {
            expect(m.data.tenantUuid).toBe(s.tenant);
            const other = s.tenant === TENANT_A ? "b" : "a";
            expect(m.data.texts.some((t: string) => t.startsWith(other))).toBe(false);
          } else {
            expect(m.data.count).toBeLessThanOrEqual(s.tenant === TENANT_A ? 31 : 20);
          }
        }
      }
      // One evaluation per group per batch at most (two groups of CountNotes, plus one trailing run each), not one per subscriber.
      expect(queryRuns.count - runsBefore).toBeLessThanOrEqual(2 * (batches + 2));
      expect(batches).toBeGreaterThan(0);
    },
  );

  it("checks the live option where the query is defined (INVALID_DOMAIN)", () => {
    const D = defineDomain("LiveOptions");
    expect(D.query("Plain").live).toBeUndefined();
    expect(D.query("Off", { live: false }).live).toBeUndefined();
    expect(D.query("On", { live: true }).live).toEqual({ share: "sender" });
    expect(D.query("Named", { live: { readmodels: ["R"], share: "tenant" } }).live).toEqual({ share: "tenant", readmodels: ["R"] });
    expect(
      D.query("Signals", { live: { readmodels: [], allTenants: true, systemEvents: ["CommandFailed", "CommandFailed"], everyMs: 50 } })
        .live,
    ).toEqual({ share: "sender", readmodels: [], allTenants: true, systemEvents: ["CommandFailed"], everyMs: 50 });
    const bad: unknown[] = [
      { share: "everyone" },
      { readmodels: [] },
      { readmodels: [""] },
      { other: 1 },
      "yes",
      [],
      { allTenants: "yes" },
      { systemEvents: [] },
      { systemEvents: ["NoSuchKind"] },
      { everyMs: 0 },
      { everyMs: 1.5 },
      { minIntervalMs: 86_400_001 },
      { readmodels: [], minIntervalMs: 10 },
    ];
    for (const [i, live] of bad.entries()) {
      expect(() => D.query(`Bad${i}`, { live: live as never })).toThrow(expect.objectContaining({ code: "INVALID_DOMAIN" }));
    }
  });

  it("Runtime queries are live: a batch of another tenant moves a tenant's handler metrics, a failed command reaches the failure list", async () => {
    const facade = await startNotes({ systemEvents: true });
    const srv = await setup(facade);
    const ann = newUser("ann", TENANT_A);
    const runtimeUrl = (tenant: string, name: string, payload: unknown) =>
      `${srv.url}/api/tenants/${tenant}/queries/Runtime/${name}/live?payload=${encodeURIComponent(JSON.stringify(payload))}`;
    // A tenant's operator: the query's own permission (authorized) and scope (its tenant) hold on the live route.
    const metrics = await open(runtimeUrl(TENANT_A, "GetMetrics", {}), ann);
    expect(metrics.status).toBe(200);
    await metrics.until((x) => x.messages.length >= 1);
    expect(metrics.messages[0]!.data.NoteProjection.eventsProcessed).toBe(0);
    expect((await StreamClient.open(runtimeUrl(TENANT_A, "GetMetrics", { allTenants: true }), ann.headers)).status).toBe(403);
    const failures = await open(runtimeUrl(TENANT_SYS, "ListFailures", { allTenants: true }), ADMIN);
    await failures.until((x) => x.messages.length >= 1);
    expect(failures.messages[0]!.data).toEqual([]);

    // Tenant B's note: no batch of tenant A, yet the handler's metrics (the instance's) changed.
    const bea = newUser("bea", TENANT_B);
    const noteUuid = newUuid();
    const add = { noteUuid, text: "b", author: "x", personUuid: newUuid() };
    const reqCtx = { ...bea.reqCtx, targetTenantUuid: TENANT_B };
    await facade.dispatch(AddNote, add, { reqCtx });
    await metrics.until((x) => x.messages.at(-1)!.data.NoteProjection.eventsProcessed === 1);
    // A failure is a system event, not a batch: the failure list follows it.
    await expect(facade.dispatch(AddNote, add, { reqCtx })).rejects.toMatchObject({ code: "CONFLICT" });
    await failures.until((x) => x.messages.at(-1)!.data.length === 1);
    expect(failures.messages.at(-1)!.data[0]).toMatchObject({ kind: "CommandFailed", tenantUuid: TENANT_B });
  });

  it("a set of live queries on one stream: each with its own permission and scope, a refusal ends that query only, the stream ends with the last", async () => {
    const facade = await startNotes();
    const srv = await setup(facade);
    const ann = newUser("ann", TENANT_A);
    const setUrl = (tenant: string, queries: unknown) =>
      `${srv.url}/api/tenants/${tenant}/live-queries?queries=${encodeURIComponent(JSON.stringify(queries))}`;
    const c = await open(
      setUrl(TENANT_A, [
        { id: "count", domain: "Notes", name: "CountNotes" },
        { id: "list", domain: "Notes", name: "ListNotes", payload: { prefix: "o" } },
        { id: "plain", domain: "Notes", name: "GetNoteCount" },
        { id: "none", domain: "Notes", name: "NoSuchQuery" },
        { id: "store", domain: "Runtime", name: "GetMetrics", payload: { allTenants: true } },
      ]),
      ann,
    );
    expect(c.status).toBe(200);
    await c.until((x) => x.messages.length >= 2 && x.blocks.filter((b) => b.event === "error").length >= 3);
    const byId = (id: string) => c.messages.filter((m) => m.data.id === id).map((m) => m.data.result);
    expect(byId("count")).toEqual([{ count: 0 }]);
    expect(byId("list")).toEqual([{ tenantUuid: TENANT_A, texts: [] }]);
    const errors = Object.fromEntries(c.blocks.filter((b) => b.event === "error").map((b) => [b.data.id, b.data.code]));
    expect(errors).toEqual({ plain: "INVALID_REQUEST", none: "UNKNOWN_QUERY", store: "PERMISSION_DENIED" });
    await addNote(facade, ann, "one");
    await c.until(() => byId("list").length === 2 && byId("count").length === 2);
    expect(byId("count").at(-1)).toEqual({ count: 1 });
    expect(byId("list").at(-1)).toEqual({ tenantUuid: TENANT_A, texts: ["one"] });
    // Another tenant's note changes neither.
    await addNote(facade, newUser("bea", TENANT_B), "other");
    await addNote(facade, ann, "two");
    await c.until(() => byId("count").length === 3);
    expect(byId("list")).toHaveLength(2);

    // A revoked session ends each query with its error, then the stream.
    revoke(ann);
    await addNote(facade, newUser("amy", TENANT_A), "three");
    await c.finished;
    const ended = c.blocks.filter((b) => b.event === "error" && b.data.code === "UNAUTHENTICATED").map((b) => b.data.id);
    expect(ended.sort()).toEqual(["count", "list"]);

    // The set itself: a session, and a well-formed list.
    const bob = newUser("bob", TENANT_A);
    expect((await StreamClient.open(setUrl(TENANT_A, [{ id: "a", domain: "Notes", name: "CountNotes" }]), {})).status).toBe(401);
    for (const bad of [
      [],
      [{ id: "a b", domain: "Notes", name: "CountNotes" }],
      [{ id: "a", domain: "Notes" }],
      [
        { id: "a", domain: "Notes", name: "CountNotes" },
        { id: "a", domain: "Notes", name: "ListNotes" },
      ],
      Array.from({ length: 33 }, (_, i) => ({ id: `q${i}`, domain: "Notes", name: "CountNotes" })),
    ]) {
      expect((await StreamClient.open(setUrl(TENANT_A, bad), bob.headers)).status).toBe(400);
    }
    // The tenant of the path is the scope of each query: another tenant's is refused per query.
    const other = await open(setUrl(TENANT_B, [{ id: "count", domain: "Notes", name: "CountNotes" }]), bob);
    await other.finished;
    expect(other.blocks.filter((b) => b.event === "error").map((b) => b.data)).toEqual([
      expect.objectContaining({ id: "count", code: "PERMISSION_DENIED" }),
    ]);
  });

  it("everyMs runs a query again without a signal and sends only changes; minIntervalMs spaces the runs of a group", async () => {
    const D = defineDomain("Timed");
    let ticks = 0;
    const starts: number[] = [];
    const Tick = D.query<Record<string, never>, { third: number }>("Tick", {
      live: { readmodels: [], everyMs: 20 },
      permission: authenticated,
    });
    const Spaced = D.query<Record<string, never>, { runs: number }>("Spaced", { live: { minIntervalMs: 150 }, permission: authenticated });
    const facade = createFacade({ appName: "timed", authorizer: notesAuthorizer });
    registerNotes(facade);
    facade.registerDomain(D, (d) => {
      d.handleQuery(Tick, () => ({ third: Math.floor(++ticks / 3) }));
      d.handleQuery(Spaced, () => {
        starts.push(performance.now());
        return { runs: starts.length };
      });
    });
    await facade.start();
    const srv = await setup(facade);
    const ann = newUser("ann", TENANT_A);
    const url = (name: string) => `${srv.url}/api/tenants/${TENANT_A}/queries/Timed/${name}/live`;
    const tick = await open(url("Tick"), ann);
    await tick.until((x) => x.messages.length >= 4);
    const sent = tick.messages.map((m) => m.data.third);
    // Three runs per value, each value sent once, in order.
    expect(sent).toEqual(sent.map((_, i) => sent[0] + i));
    expect(ticks).toBeGreaterThanOrEqual(3 * (sent.length - 1));

    const spaced = await open(url("Spaced"), ann);
    await spaced.until((x) => x.messages.length >= 1);
    for (let i = 0; i < 6; i++) await addNote(facade, ann, `n${i}`);
    await spaced.until((x) => x.messages.length >= 2);
    await new Promise((r) => setTimeout(r, 400));
    // The interval is kept between the starts of a group's runs; the handler runs after the run re-checked its
    // subscribers' sessions, which takes longer on a busy machine, so its own times are allowed some slack (without
    // the interval, these six notes' runs would come milliseconds apart).
    for (let i = 2; i < starts.length; i++) expect(starts[i]! - starts[i - 1]!).toBeGreaterThanOrEqual(120);
  });

  it.each(HTTP_PATHS)(
    "%s path: answers at once and after each change; the query's permission and tenant scope decide; a revoked session ends the stream",
    async (httpPath) => {
      const facade = await startNotes();
      const srv = await setup(facade, httpPath);
      const ann = newUser("ann", TENANT_A);
      const c = await open(liveUrl(srv.url, TENANT_A, "CountNotes"), ann);
      await c.until((x) => x.messages.length >= 1);
      expect(c.messages[0]!.data).toEqual({ count: 0 });
      await addNote(facade, ann, "one");
      await c.until((x) => x.messages.at(-1)!.data.count === 1);
      // An unchanged result is not sent again: a note of tenant B commits a batch but changes nothing here.
      await addNote(facade, newUser("bea", TENANT_B), "other");
      await addNote(facade, ann, "two");
      await c.until((x) => x.messages.at(-1)!.data.count === 2);
      expect(c.messages.map((m) => m.data.count)).toEqual([0, 1, 2]);

      const refused = [
        [liveUrl(srv.url, TENANT_B, "CountNotes"), ann, 403],
        [liveUrl(srv.url, TENANT_A, "GetNoteCount"), ann, 400],
        [liveUrl(srv.url, TENANT_A, "NoSuchQuery"), ann, 404],
        [`${liveUrl(srv.url, TENANT_A, "ListNotes")}?payload=%7Bnot-json`, ann, 400],
        [`${liveUrl(srv.url, TENANT_A, "ListNotes")}?payload=%5B1%5D`, ann, 400],
      ] as const;
      for (const [url, user, status] of refused) {
        const r = await StreamClient.open(url, user.headers);
        expect({ url, status: r.status }).toEqual({ url, status });
      }
      expect((await StreamClient.open(liveUrl(srv.url, TENANT_A, "CountNotes"), {})).status).toBe(401);
      // The administrator may read any tenant.
      const admin = await open(liveUrl(srv.url, TENANT_B, "CountNotes"), ADMIN);
      await admin.until((x) => x.messages.length >= 1);
      expect(admin.messages[0]!.data).toEqual({ count: 1 });

      revoke(ann);
      await addNote(facade, newUser("amy", TENANT_A), "three");
      await c.finished;
      expect(c.blocks.at(-1)).toMatchObject({ event: "error", data: { code: "UNAUTHENTICATED" } });
      expect(c.messages.map((m) => m.data.count)).toEqual([0, 1, 2]);
    },
  );

  it(
    "Postgres: 20 subscribers of two tenants follow a burst of writes, each its own tenant's notes only",
    { timeout: 60_000 },
    async () => {
      const schema = pg.newSchema();
      const facade = await startNotes(createPostgresBackends({ connectionString: DATABASE_URL, schema }));
      const srv = await setup(facade);
      const users = Array.from({ length: 4 }, (_, i) => newUser(`p${i}`, i % 2 === 0 ? TENANT_A : TENANT_B));
      const subs = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          open(liveUrl(srv.url, users[i % 4]!.reqCtx.senderTenantUuid!, "ListNotes", {}), users[i % 4]!),
        ),
      );
      await Promise.all(subs.map((c) => c.until((x) => x.messages.length >= 1)));
      await Promise.all(Array.from({ length: 24 }, (_, i) => addNote(facade, users[i % 4]!, `${i % 2 === 0 ? "a" : "b"}${i}`)));
      await Promise.all(
        subs.map((c, i) =>
          c.until((x) => {
            const last = x.messages.at(-1)!.data;
            return last.texts.length === 12 && last.tenantUuid === users[i % 4]!.reqCtx.senderTenantUuid;
          }),
        ),
      );
      for (const [i, c] of subs.entries()) {
        const own = i % 2 === 0 ? "a" : "b";
        for (const m of c.messages) expect(m.data.texts.every((t: string) => t.startsWith(own))).toBe(true);
      }
    },
  );
});
