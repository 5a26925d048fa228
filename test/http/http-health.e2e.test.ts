/**
 * Health endpoints and functions: GET /health/live and /health/ready over a
 * real node:http server (both of toNodeListener's paths), without credentials;
 * readiness failing with 503 and naming the failed check when an event
 * handler is stopped or failed, when a handler lags past maxLag, and when the
 * database cannot be reached (Postgres behind a TCP proxy the test cuts);
 * checkLiveness / checkReadiness called without HTTP.
 */
import { createServer, type Server, Socket } from "node:net";
import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { BaseReadmodel, type Facade, createFacade, newUuid } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { checkLiveness, checkReadiness, HEALTH_DEFAULTS } from "mneme/http";
import { Counter, CounterTotals, Increment, Incremented } from "../support/counter-domain.js";
import { HTTP_PATHS, call, serve, type HttpPath, type TestServer } from "../support/http-fixture.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A readmodel whose handling waits at a gate the test opens, so it falls behind on purpose. */
class Gated extends BaseReadmodel {
  #open: () => void = () => undefined;
  #gate: Promise<void> = new Promise((resolve) => (this.#open = resolve));
  handled = 0;

  constructor(facade: Facade) {
    super(facade);
    this.domain = "Counter";
    this.name = "Gated";
    this.addDomainEventHandler(Incremented, async () => {
      await this.#gate;
      this.handled++;
    });
  }

  open(): void {
    this.#open();
  }
}

async function counterFacade(opts: Parameters<typeof createFacade>[0] = {}): Promise<{ facade: Facade; totals: CounterTotals }> {
  const facade = createFacade({ appName: "health-test", ...opts });
  facade.registerDomain(Counter);
  const totals = new CounterTotals(facade);
  facade.registerReadmodel(totals);
  return { facade, totals };
}

async function started(facade: Facade, srvOpts: Parameters<typeof serve>[1], path: HttpPath): Promise<TestServer> {
  await facade.start();
  const srv = await serve(facade, srvOpts, path);
  cleanups.push(async () => {
    await srv.close();
    await facade.stop();
  });
  return srv;
}

/** Polls until fn() holds; for state that changes after asynchronous delivery. */
async function eventually(fn: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error("condition not reached");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(HTTP_PATHS)("health endpoints over node:http, %s path", (httpPath) => {
  it("a healthy facade: live and ready answer 200 with every check passed, without credentials", async () => {
    const { facade } = await counterFacade();
    const srv = await started(facade, {}, httpPath);
    await facade.dispatch(Increment, { counterUuid: newUuid(), by: 1 }, { waitToFinish: true });

    const live = await call(srv.url, "GET", "/health/live");
    expect(live.status).toBe(200);
    expect(live.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(live.headers.get("cache-control")).toBe("no-store");
    expect(live.body).toMatchObject({ status: "pass", checks: { eventLoop: { status: "pass" } } });

    const ready = await call(srv.url, "GET", "/health/ready");
    expect(ready.status, JSON.stringify(ready.body)).toBe(200);
    expect(ready.body).toMatchObject({
      status: "pass",
      checks: {
        facade: { status: "pass", state: "started" },
        eventStore: { status: "pass", headPosition: 1 },
        eventHandlers: { status: "pass", count: 1 },
        lag: { status: "pass", maxLag: HEALTH_DEFAULTS.maxLag },
      },
    });

    const head = await fetch(`${srv.url}/health/ready`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
    const post = await call(srv.url, "POST", "/health/ready", { body: {} });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
  });

  it("503 naming the handler when an event handler is stopped, and when one failed; 200 again once it runs", async () => {
    const { facade, totals } = await counterFacade();
    const srv = await started(facade, {}, httpPath);
    await facade.runtime.controlEventHandler({ action: "stop", eventHandlerName: "CounterTotals" });

    const stopped = await call(srv.url, "GET", "/health/ready");
    expect(stopped.status).toBe(503);
    expect(stopped.body.status).toBe("fail");
    expect(stopped.body.checks.eventHandlers).toMatchObject({
      status: "fail",
      notRunning: [{ eventHandlerName: "CounterTotals", state: "stopped" }],
    });
    expect(stopped.body.checks.eventStore.status).toBe("pass");
    // Liveness does not depend on the handlers: a restart would not help.
    expect((await call(srv.url, "GET", "/health/live")).status).toBe(200);

    await facade.runtime.controlEventHandler({ action: "start", eventHandlerName: "CounterTotals" });
    expect((await call(srv.url, "GET", "/health/ready")).status).toBe(200);

    totals.failOn = () => true;
    await facade.dispatch(Increment, { counterUuid: newUuid(), by: 1 }, { waitToFinish: true });
    const failed = await call(srv.url, "GET", "/health/ready");
    expect(failed.status).toBe(503);
    expect(failed.body.checks.eventHandlers.notRunning).toEqual([{ eventHandlerName: "CounterTotals", state: "failed" }]);
    expect(failed.body.checks.eventHandlers.detail).toContain("CounterTotals (failed)");
  });

  it("503 when a running handler lags more than maxLag positions; 200 once it caught up", async () => {
    const facade = createFacade({ appName: "health-lag" });
    facade.registerDomain(Counter);
    const gated = new Gated(facade);
    facade.registerReadmodel(gated);
    const srv = await started(facade, { health: { maxLag: 2 } }, httpPath);

    for (let i = 0; i < 4; i++) await facade.dispatch(Increment, { counterUuid: newUuid(), by: 1 });
    // The handler waits at its first event: 4 positions behind a head of 4.
    const behind = await call(srv.url, "GET", "/health/ready");
    expect(behind.status).toBe(503);
    expect(behind.body.checks.lag).toMatchObject({ status: "fail", maxLag: 2, headPosition: 4, lagging: [{ eventHandlerName: "Gated" }] });
    expect(behind.body.checks.lag.lagging[0].lag).toBeGreaterThan(2);
    expect(behind.body.checks.eventHandlers.status).toBe("pass");

    gated.open();
    await eventually(async () => (await call(srv.url, "GET", "/health/ready")).status === 200);
    expect(gated.handled).toBe(4);
  });

  it("under basePath, and absent with health: false", async () => {
    const { facade } = await counterFacade();
    const srv = await started(facade, { basePath: "/mneme" }, httpPath);
    expect((await call(srv.url, "GET", "/mneme/health/ready")).status).toBe(200);
    expect((await call(srv.url, "GET", "/health/ready")).status).toBe(404);
    const off = await serve(facade, { health: false }, httpPath);
    cleanups.push(() => off.close());
    expect((await call(off.url, "GET", "/health/live")).status).toBe(404);
    expect((await call(off.url, "GET", "/health/ready")).status).toBe(404);
  });
});

describe("checkLiveness / checkReadiness without HTTP", () => {
  it("readiness fails while the facade is not started, and passes once it is", async () => {
    const { facade } = await counterFacade();
    const before = await checkReadiness(facade);
    expect(before.status).toBe("fail");
    expect(before.checks.facade).toMatchObject({ status: "fail", state: "new" });
    await facade.start();
    cleanups.push(() => facade.stop());
    expect((await checkReadiness(facade)).status).toBe("pass");
  });

  it("liveness fails when a turn of the event loop takes longer than maxEventLoopDelayMs", async () => {
    // This timer is due before the check's own, so the check waits for the whole busy loop.
    setTimeout(() => {
      const until = performance.now() + 60;
      while (performance.now() < until);
    }, 0);
    const slow = await checkLiveness({ maxEventLoopDelayMs: 20 });
    expect(slow.status).toBe("fail");
    expect(slow.checks.eventLoop!.delayMs).toBeGreaterThanOrEqual(60);
    expect(slow.checks.eventLoop!.detail).toMatch(/event loop/);
  });

  it("bad thresholds are INVALID_REQUEST, in the functions and in createHttpHandler", async () => {
    const { facade } = await counterFacade();
    await expect(checkReadiness(facade, { maxLag: -1 })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    await expect(checkLiveness({ maxEventLoopDelayMs: 0 })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    await expect(serve(facade, { health: { timeoutMs: 1.5 } })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    // @ts-expect-error -- true is not an option: the endpoints are on unless turned off
    await expect(serve(facade, { health: true })).rejects.toThrow(/health must be false or an object/);
  });
});

// Postgres reached through a TCP proxy on 127.0.0.1 that the test cuts and restores: the database "goes away".
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

class TcpProxy {
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  port = 0;

  constructor(
    readonly targetHost: string,
    readonly targetPort: number,
  ) {}

  async start(): Promise<void> {
    if (this.#server !== undefined) return;
    const server = createServer((client) => {
      const upstream = new Socket();
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on("close", () => this.#sockets.delete(s));
        s.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      upstream.connect(this.targetPort, this.targetHost);
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    this.port = (server.address() as { port: number }).port;
    this.#server = server;
  }

  /** Refuses new connections and cuts the open ones. */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describe.each(HTTP_PATHS)("readiness with Postgres, %s path", (httpPath) => {
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  admin.on("error", () => undefined);
  const schema = `mneme_health_${httpPath}_${newUuid().replace(/-/g, "").slice(-12)}`;
  afterAll(async () => {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  });

  it("503 with the event store's check failed (and no connection details) while the database cannot be reached; 200 again after", async () => {
    const target = new URL(DATABASE_URL);
    const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.start();
    cleanups.push(() => proxy.stop());
    const viaProxy = new URL(DATABASE_URL);
    viaProxy.hostname = "127.0.0.1";
    viaProxy.port = String(proxy.port);
    const backends = createPostgresBackends({ connectionString: viaProxy.href, schema });
    const { facade } = await counterFacade({ ...backends });
    const srv = await started(facade, { health: { timeoutMs: 3000 } }, httpPath);
    cleanups.push(() => proxy.start().catch(() => undefined)); // facade.stop() (registered before) needs the database back
    await facade.dispatch(Increment, { counterUuid: newUuid(), by: 1 }, { waitToFinish: true });
    expect((await call(srv.url, "GET", "/health/ready")).status).toBe(200);

    await proxy.stop();
    const down = await call(srv.url, "GET", "/health/ready");
    expect(down.status).toBe(503);
    expect(down.body.status).toBe("fail");
    expect(down.body.checks.eventStore).toMatchObject({ status: "fail" });
    expect(typeof down.body.checks.eventStore.error).toBe("string");
    const text = JSON.stringify(down.body);
    for (const secret of ["postgres://", target.username || "postgres@", schema]) expect(text).not.toContain(secret);
    // The port as an address or named as one: the bare digits could occur inside a number of the body (a time, a count) by chance.
    expect(text).not.toMatch(new RegExp(`[\\w.\\]]:${proxy.port}(?!\\d)|port\\W{0,3}${proxy.port}(?!\\d)`, "i"));
    // The process itself is fine: liveness stays 200.
    expect((await call(srv.url, "GET", "/health/live")).status).toBe(200);

    await proxy.start();
    await eventually(async () => (await call(srv.url, "GET", "/health/ready")).status === 200);
  });
});
