/**
 * The system-event stream over a real server: ids, resume after a reconnect
 * with no event missing, tenant selection, heartbeat, the connection limit,
 * client abort, facade.stop(), a producer that is not running, a client that
 * does not read.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type Facade, createFacade, newUuid } from "mneme";
import { createHttpHandler } from "mneme/http";
import {
  ADMIN,
  TENANT_A,
  TENANT_SYS,
  USER,
  call,
  serve,
  startFacade,
  testAuthorizer,
  testResolver,
  type TestServer,
  HTTP_PATHS,
} from "../support/http-fixture.js";
import { SseClient } from "../support/sse-client.js";

describe.each(HTTP_PATHS)("over node:http, %s path", (httpPath) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup(
    options: Parameters<typeof serve>[1] = {},
    facadeOpts: Parameters<typeof startFacade>[0] = {},
  ): Promise<{ facade: Facade; srv: TestServer }> {
    const facade = await startFacade(facadeOpts);
    const srv = await serve(facade, options, httpPath);
    cleanups.push(async () => {
      await srv.close();
      await facade.stop();
    });
    return { facade, srv };
  }

  const sse = (srv: TestServer, tenant = TENANT_A, query = "") => `${srv.url}/api/tenants/${tenant}/runtime/sse${query}`;
  const createTodo = (srv: TestServer, tenant = TENANT_A) =>
    call(srv.url, "POST", `/api/tenants/${tenant}/commands/Todo/CreateTodo`, {
      body: { todoUuid: newUuid(), title: "t" },
      headers: USER.headers,
    });

  /** Polls until fn() holds; for state the server changes after an asynchronous close. */
  async function eventually(fn: () => boolean, ms = 5000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!fn()) {
      if (Date.now() > deadline) throw new Error("condition not reached");
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  describe("GET /api/tenants/{tenantUuid}/runtime/sse", () => {
    it("sends retry: first, then every event with its id: and the system event as data", async () => {
      const { facade, srv } = await setup();
      const client = await SseClient.open(sse(srv), ADMIN.headers);
      cleanups.unshift(() => client.close());
      expect(client.status).toBe(200);
      await eventually(() => facade.systemEvents.subscriberCount === 1);
      await createTodo(srv);
      await client.until((c) => c.events.some((e) => e.data.kind === "EventsAppended"));
      expect(client.retry).toBe(2000);
      expect(client.comments).toContain("connected");
      for (const e of client.events) {
        expect(e.id).toBe(e.data.id);
        expect(typeof e.data.kind).toBe("string");
      }
      const executed = client.events.find((e) => e.data.kind === "CommandExecuted")!;
      expect(executed.data).toMatchObject({ tenantUuid: TENANT_A, data: { domain: "Todo", name: "CreateTodo", events: 1 } });
    });

    it("resumes after a reconnect from Last-Event-ID with no event missing and none twice", async () => {
      const { facade, srv } = await setup();
      const first = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true"), ADMIN.headers);
      await eventually(() => facade.systemEvents.subscriberCount === 1);
      for (let i = 0; i < 3; i++) await createTodo(srv);
      await first.until((c) => c.events.length >= 6);
      const lastSeen = first.events[first.events.length - 1]!.id;
      await first.close();
      await eventually(() => facade.systemEvents.subscriberCount === 0);

      // Traffic while nobody listens: commands of two tenants.
      for (let i = 0; i < 4; i++) await createTodo(srv, i % 2 === 0 ? TENANT_A : TENANT_SYS);
      const missed = facade.systemEvents.replay(lastSeen).map((e) => e.id);
      expect(missed.length).toBe(8);

      const second = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true"), { ...ADMIN.headers, "last-event-id": String(lastSeen) });
      cleanups.unshift(() => second.close());
      await second.until((c) => c.events.length >= missed.length);
      await createTodo(srv);
      await second.until((c) => c.events.length >= missed.length + 2);
      const ids = second.events.map((e) => e.id);
      expect(ids.slice(0, missed.length)).toEqual(missed);
      // Contiguous from lastSeen + 1: nothing lost between the two connections, nothing repeated.
      expect(ids).toEqual(ids.map((_, i) => lastSeen + 1 + i));
      expect([...first.events.map((e) => e.id), ...ids]).toEqual(
        [...first.events.map((e) => e.id), ...ids].map((_, i) => first.events[0]!.id + i),
      );

      // EventSource cannot set a header on its first connection: the query parameter does the same.
      const third = await SseClient.open(sse(srv, TENANT_A, `?allTenants=true&lastEventId=${lastSeen}`), ADMIN.headers);
      cleanups.unshift(() => third.close());
      await third.until((c) => c.events.length >= missed.length);
      expect(third.events.slice(0, missed.length).map((e) => e.id)).toEqual(missed);
    });

    it("after a restart, a Last-Event-ID of the previous run starts the stream with event: gap (unknown-epoch), then every new event", async () => {
      // The defect: ids restarted at 1, so Last-Event-ID 82 after 114 new events replayed only 83..114, silently.
      const before = await setup();
      const first = await SseClient.open(sse(before.srv, TENANT_A, "?allTenants=true"), ADMIN.headers);
      await eventually(() => before.facade.systemEvents.subscriberCount === 1);
      for (let i = 0; i < 3; i++) await createTodo(before.srv);
      await first.until((c) => c.events.length >= 6);
      const lastSeen = first.lastEventId!;
      expect(lastSeen).toBe(first.events[5]!.id);
      await first.close();
      await cleanups.pop()!(); // the process goes away

      const after = await setup(); // a new process: a new producer
      for (let i = 0; i < 5; i++) await createTodo(after.srv);
      const expected = after.facade.systemEvents.replay(0).map((e) => e.id);
      expect(expected.length).toBeGreaterThanOrEqual(10); // the start's own events, then 2 per command
      const second = await SseClient.open(sse(after.srv, TENANT_A, "?allTenants=true"), {
        ...ADMIN.headers,
        "last-event-id": String(lastSeen),
      });
      cleanups.unshift(() => second.close());
      await second.until((c) => c.events.length >= expected.length);
      expect(second.gaps).toEqual([{ id: expect.any(Number), data: { lastEventId: lastSeen, reason: "unknown-epoch" } }]);
      expect(second.events.map((e) => e.id)).toEqual(expected);
      expect(expected.every((id) => !first.events.some((e) => e.id === id))).toBe(true);

      // The gap's id: makes the client's next reconnect exact: no second notice, nothing twice.
      await second.close();
      await eventually(() => after.facade.systemEvents.subscriberCount === 0);
      const third = await SseClient.open(sse(after.srv, TENANT_A, "?allTenants=true"), {
        ...ADMIN.headers,
        "last-event-id": String(second.gaps[0]!.id),
      });
      cleanups.unshift(() => third.close());
      await third.until((c) => c.events.length >= expected.length);
      expect(third.gaps).toEqual([]);
      expect(third.events.map((e) => e.id)).toEqual(expected);
    });

    it("a Last-Event-ID older than the ring buffer starts the stream with event: gap (buffer-overflow)", async () => {
      const { facade, srv } = await setup({}, { systemEvents: { bufferSize: 4 } });
      for (let i = 0; i < 4; i++) await createTodo(srv); // 8 events: only the last 4 are kept
      const all = facade.systemEvents.replay(0).map((e) => e.id);
      expect(all.length).toBe(4);
      const old = all[0]! - 3; // seen by a client that left early
      const client = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true"), { ...ADMIN.headers, "last-event-id": String(old) });
      cleanups.unshift(() => client.close());
      await client.until((c) => c.events.length >= 4);
      expect(client.gaps).toEqual([{ id: all[0]! - 1, data: { lastEventId: old, reason: "buffer-overflow" } }]);
      expect(client.events.map((e) => e.id)).toEqual(all);
      // The id evicted last is still exact.
      const exact = await SseClient.open(sse(srv, TENANT_A, `?allTenants=true&lastEventId=${all[0]! - 1}`), ADMIN.headers);
      cleanups.unshift(() => exact.close());
      await exact.until((c) => c.events.length >= 4);
      expect(exact.gaps).toEqual([]);
      expect(exact.events.map((e) => e.id)).toEqual(all);
    });

    it("a Last-Event-ID of another instance of the app starts the stream with event: gap (unknown-epoch)", async () => {
      const a = await setup();
      const b = await setup();
      for (let i = 0; i < 2; i++) await createTodo(a.srv);
      await createTodo(b.srv);
      const fromA = a.facade.systemEvents.lastEventId;
      const onB = b.facade.systemEvents.replay(0).map((e) => e.id);
      expect(onB.length).toBeGreaterThanOrEqual(2);
      expect(onB).not.toContain(fromA);
      const client = await SseClient.open(sse(b.srv, TENANT_A, "?allTenants=true"), { ...ADMIN.headers, "last-event-id": String(fromA) });
      cleanups.unshift(() => client.close());
      await client.until((c) => c.events.length >= onB.length);
      expect(client.gaps.map((g) => g.data)).toEqual([{ lastEventId: fromA, reason: "unknown-epoch" }]);
      expect(client.events.map((e) => e.id)).toEqual(onB);
    });

    it("a stream opened without Last-Event-ID sends the current id first, so a reconnect before any event misses nothing", async () => {
      const { facade, srv } = await setup();
      await createTodo(srv);
      const head = facade.systemEvents.lastEventId;
      const first = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true"), ADMIN.headers);
      await first.until((c) => c.lastEventId !== undefined);
      expect(first.lastEventId).toBe(head);
      expect(first.events).toEqual([]);
      await first.close();
      await eventually(() => facade.systemEvents.subscriberCount === 0);
      await createTodo(srv); // while the client is away
      const second = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true"), {
        ...ADMIN.headers,
        "last-event-id": String(first.lastEventId),
      });
      cleanups.unshift(() => second.close());
      await second.until((c) => c.events.length >= 2);
      expect(second.gaps).toEqual([]);
      expect(second.events.map((e) => e.id)).toEqual(facade.systemEvents.replay(head).map((e) => e.id));
      expect(second.events.map((e) => e.data.kind)).toEqual(["CommandExecuted", "EventsAppended"]);
    });

    it("shows the path's tenant and system-wide events; ?allTenants=true shows every tenant", async () => {
      const { facade, srv } = await setup();
      const mine = await SseClient.open(sse(srv, TENANT_A), ADMIN.headers);
      const all = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true"), ADMIN.headers);
      cleanups.unshift(
        () => mine.close(),
        () => all.close(),
      );
      await eventually(() => facade.systemEvents.subscriberCount === 2);
      await createTodo(srv, TENANT_SYS);
      await createTodo(srv, TENANT_A);
      facade.systemEvents.publish("StoreEntryChanged", { store: "cache", action: "Update", key: "k" });
      await all.until((c) => c.events.some((e) => e.data.kind === "StoreEntryChanged"));
      await mine.until((c) => c.events.some((e) => e.data.kind === "StoreEntryChanged"));
      expect(new Set(all.events.map((e) => e.data.tenantUuid))).toEqual(new Set([TENANT_SYS, TENANT_A, undefined]));
      expect(mine.events.every((e) => e.data.tenantUuid === undefined || e.data.tenantUuid === TENANT_A)).toBe(true);
      expect(mine.events.filter((e) => e.data.tenantUuid === TENANT_A).length).toBe(2);
    });

    it("sends a heartbeat comment at the configured interval", async () => {
      const { srv } = await setup({ sse: { heartbeatMs: 20 } });
      const client = await SseClient.open(sse(srv), ADMIN.headers);
      cleanups.unshift(() => client.close());
      await client.until((c) => c.comments.filter((x) => x === "heartbeat").length >= 2);
    });

    it("refuses the connection over the limit with 503 SSE_CONNECTION_LIMIT, and frees the slot when a client leaves", async () => {
      const { facade, srv } = await setup({ sse: { maxConnections: 2 } });
      const a = await SseClient.open(sse(srv), ADMIN.headers);
      const b = await SseClient.open(sse(srv), ADMIN.headers);
      cleanups.unshift(() => b.close());
      expect([a.status, b.status]).toEqual([200, 200]);
      const over = await call(srv.url, "GET", `/api/tenants/${TENANT_A}/runtime/sse`, { headers: ADMIN.headers });
      expect(over.status).toBe(503);
      expect(over.body).toMatchObject({ code: "SSE_CONNECTION_LIMIT", status: 503 });
      await a.close();
      await eventually(() => facade.systemEvents.subscriberCount === 1);
      const c = await SseClient.open(sse(srv), ADMIN.headers);
      cleanups.unshift(() => c.close());
      expect(c.status).toBe(200);
    });

    it("ends every stream cleanly on facade.stop()", async () => {
      const facade = await startFacade();
      const srv = await serve(facade, {}, httpPath);
      cleanups.push(() => srv.close());
      const a = await SseClient.open(sse(srv), ADMIN.headers);
      const b = await SseClient.open(sse(srv, TENANT_SYS), ADMIN.headers);
      await eventually(() => facade.systemEvents.subscriberCount === 2);
      await facade.stop();
      await Promise.all([a.finished, b.finished]);
      expect(a.ended && b.ended).toBe(true);
      expect(facade.systemEvents.subscriberCount).toBe(0);
    });

    it("answers 503 SSE_PRODUCER_NOT_RUNNING when the producer is not running", async () => {
      const { srv } = await setup({}, { systemEvents: false });
      const r = await call(srv.url, "GET", `/api/tenants/${TENANT_A}/runtime/sse`, { headers: ADMIN.headers });
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ code: "SSE_PRODUCER_NOT_RUNNING" });
    });

    it("any Last-Event-ID it cannot continue, a non-number included, gets 200 and starts with event: gap (unknown-id), then everything buffered; never a 4xx", async () => {
      const { facade, srv } = await setup();
      for (let i = 0; i < 2; i++) await createTodo(srv);
      const all = facade.systemEvents.replay(0).map((e) => e.id);
      expect(all.length).toBeGreaterThanOrEqual(4);
      const long = "x".repeat(300);
      const notIds = ["abc", "-1", "1.5", "1e3", "0x10", "99999999999999999999", " 12abc ", long];
      for (const bad of notIds) {
        const client = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true"), { ...ADMIN.headers, "last-event-id": bad });
        cleanups.unshift(() => client.close());
        expect(client.status, bad).toBe(200);
        await client.until((c) => c.events.length >= all.length);
        // The notice repeats what was sent (trimmed, at most 64 characters); its id: makes the next reconnect exact.
        expect(client.gaps, bad).toEqual([{ id: all[0]! - 1, data: { lastEventId: bad.trim().slice(0, 64), reason: "unknown-id" } }]);
        expect(client.events.map((e) => e.id)).toEqual(all);
      }
      // The query parameter an EventSource uses on its first connection is read the same way.
      const byQuery = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true&lastEventId=abc"), ADMIN.headers);
      cleanups.unshift(() => byQuery.close());
      expect(byQuery.status).toBe(200);
      await byQuery.until((c) => c.gaps.length === 1);
      expect(byQuery.gaps[0]!.data).toEqual({ lastEventId: "abc", reason: "unknown-id" });
      // An id of this producer that it never issued: unknown-id as well.
      const ahead = facade.systemEvents.lastEventId + 10;
      const future = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true"), { ...ADMIN.headers, "last-event-id": String(ahead) });
      cleanups.unshift(() => future.close());
      await future.until((c) => c.gaps.length === 1);
      expect(future.gaps[0]!.data).toEqual({ lastEventId: ahead, reason: "unknown-id" });
    });

    it("after an unreadable Last-Event-ID whose buffer overflowed, the gap's id: is the last evicted id, and a reconnect with it is exact", async () => {
      const { facade, srv } = await setup({}, { systemEvents: { bufferSize: 4 } });
      for (let i = 0; i < 4; i++) await createTodo(srv);
      const all = facade.systemEvents.replay(0).map((e) => e.id);
      expect(all.length).toBe(4);
      const client = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true"), { ...ADMIN.headers, "last-event-id": "not-an-id" });
      cleanups.unshift(() => client.close());
      await client.until((c) => c.events.length >= 4);
      expect(client.gaps).toEqual([{ id: all[0]! - 1, data: { lastEventId: "not-an-id", reason: "unknown-id" } }]);
      expect(client.events.map((e) => e.id)).toEqual(all);
      const again = await SseClient.open(sse(srv, TENANT_A, "?allTenants=true"), {
        ...ADMIN.headers,
        "last-event-id": String(client.gaps[0]!.id),
      });
      cleanups.unshift(() => again.close());
      await again.until((c) => c.events.length >= 4);
      expect(again.gaps).toEqual([]);
      expect(again.events.map((e) => e.id)).toEqual(all);
    });

    it("closes the stream of a client that stops reading once maxQueuedEvents pile up, and frees its slot", async () => {
      const facade = await startFacade();
      cleanups.push(() => facade.stop());
      const handler = createHttpHandler(facade, { resolveCredentials: testResolver, sse: { maxQueuedEvents: 5, maxConnections: 1 } });
      const res = await handler(new Request(`http://x/api/tenants/${TENANT_A}/runtime/sse`, { headers: ADMIN.headers }));
      expect(res.status).toBe(200);
      expect(facade.systemEvents.subscriberCount).toBe(1);
      for (let i = 0; i < 10; i++) facade.systemEvents.publish("StoreEntryChanged", { i });
      expect(facade.systemEvents.subscriberCount).toBe(0);
      // The slot is free again, and what was queued is still readable before the end.
      const again = await handler(new Request(`http://x/api/tenants/${TENANT_A}/runtime/sse`, { headers: ADMIN.headers }));
      expect(again.status).toBe(200);
      await again.body?.cancel();
      const text = await res.text();
      expect(text.startsWith("retry: 2000\n: connected\n\n")).toBe(true);
      expect(text.match(/^id: /gm)?.length).toBeGreaterThan(0);
    });

    it("a client abort through the Fetch signal unsubscribes at once", async () => {
      const facade = await startFacade();
      cleanups.push(() => facade.stop());
      const handler = createHttpHandler(facade, { resolveCredentials: testResolver });
      const ac = new AbortController();
      const res = await handler(new Request(`http://x/api/tenants/${TENANT_A}/runtime/sse`, { headers: ADMIN.headers, signal: ac.signal }));
      expect(facade.systemEvents.subscriberCount).toBe(1);
      ac.abort();
      expect(facade.systemEvents.subscriberCount).toBe(0);
      expect(await res.text()).toContain(": connected");
    });
  });

  describe("the facade used by the SSE fixture", () => {
    it("denies the stream to a user and to an anonymous caller before anything is subscribed", async () => {
      const facade = createFacade({ systemEvents: true, authorizer: testAuthorizer });
      await facade.start();
      cleanups.push(() => facade.stop());
      const handler = createHttpHandler(facade, { resolveCredentials: testResolver });
      const denied = await handler(new Request(`http://x/api/tenants/${TENANT_A}/runtime/sse`, { headers: USER.headers }));
      const anon = await handler(new Request(`http://x/api/tenants/${TENANT_A}/runtime/sse`));
      expect([denied.status, anon.status]).toEqual([403, 401]);
      expect(facade.systemEvents.subscriberCount).toBe(0);
    });
  });
});
