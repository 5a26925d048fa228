/**
 * The Runtime dashboard in a real browser: headless Chromium (Debian's
 * package, driven by playwright-core) against a real facade behind node:http
 * on 127.0.0.1 with createHttpHandler(f, { dashboard: true }). An operator signs
 * in, sees the handlers, restores one from zero and watches it come back, sees
 * a dispatched command in the live stream (also across a dropped connection,
 * resumed with Last-Event-ID, and a gap when the server cannot resume), and a
 * non-administrator is refused the stores by the server. Also the serving
 * itself over the wire: types, caching, CSP, no traversal, off by default.
 *
 * Without Chromium the browser part is skipped with the reason, unless CI is
 * set: on CI a missing browser fails the run.
 */
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import type { Page, Route } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Facade, createFacade, newUuid } from "mneme";
import { registerDefaults } from "mneme/defaults";
import { createHttpHandler } from "mneme/http";
import { NatsConsumer, NatsPublisher } from "mneme/nats";
import { ShardsDomain } from "mneme/shards";
import { installShardsDomain } from "../../src/shards/shards-domain.js";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { CreateTodo, ListTodos, TodoCreated } from "../../examples/todo/todo-domain.js";
import { browserGate, onCi } from "../support/chromium.js";
import { type DashboardPages, dashboardPages } from "../support/dashboard-pages.js";
import { ADMIN, type DashboardWorld, OPERATOR, startDashboardWorld } from "../support/dashboard-fixture.js";
import { runProcess } from "../support/run-process.js";

const root = join(import.meta.dirname, "..", "..");
const { chromiumPath, skip: skipBrowser, reason: NO_BROWSER } = browserGate("test/dashboard/dashboard.e2e.test.ts");

let world: DashboardWorld;

/** Waits for the page to reach a state (vitest's default of one second is short on a loaded machine). */
const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 15_000, interval: 50 });

beforeAll(async () => {
  // The tests serve what `npm run build` builds: build the dashboard from the current sources.
  const build = await runProcess(process.execPath, [join(root, "scripts", "build-dashboard.mjs")], root, 120_000);
  expect(build.code, build.stderr + build.stdout).toBe(0);
  // A small system-event buffer, so that a long disconnection overflows it (the gap test).
  // Small pages: the page reads every list page after page, whatever the server's page size.
  world = await startDashboardWorld({
    // Restores report progress every 10 events, so a restore of the 30 todos is seen under way.
    facade: { systemEvents: { bufferSize: 40 }, delivery: { restoreBatchSize: 10, progressEvery: 10 } },
    http: { sse: { retryMs: 300 }, defaultPageSize: 5, maxPageSize: 10 },
  });
  await world.createTodos(30);
}, 180_000);

afterAll(async () => {
  await world?.close();
});

/** A raw GET: the path goes on the wire as written (fetch would normalise `..`). */
function rawGet(url: string, path: string, headers: Record<string, string> = {}, method = "GET") {
  const { hostname, port } = new URL(url);
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }>((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, method, headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("serving /dashboard/ over HTTP", () => {
  it("index.html, modules, stylesheet and icon with their types, ETag, no-cache and the strict CSP", async () => {
    const index = await rawGet(world.url, "/dashboard/");
    expect(index.status).toBe(200);
    expect(index.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(index.headers["cache-control"]).toBe("no-cache");
    const csp = String(index.headers["content-security-policy"]);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toContain("unsafe");
    // No inline script anywhere in the page: the one script is a module file.
    expect(index.body).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(index.body).toContain('<script type="module" src="js/main.js"></script>');
    for (const [path, type] of [
      ["/dashboard/js/main.js", "text/javascript; charset=utf-8"],
      ["/dashboard/js/views/handlers.js", "text/javascript; charset=utf-8"],
      ["/dashboard/dashboard.css", "text/css; charset=utf-8"],
      ["/dashboard/favicon.svg", "image/svg+xml"],
    ] as const) {
      const r = await rawGet(world.url, path);
      expect([path, r.status, r.headers["content-type"]]).toEqual([path, 200, type]);
    }
    const again = await rawGet(world.url, "/dashboard/", { "if-none-match": String(index.headers.etag) });
    expect(again.status).toBe(304);
    expect(again.body).toBe("");
    const head = await rawGet(world.url, "/dashboard/js/main.js", {}, "HEAD");
    expect(head.status).toBe(200);
    expect(head.body).toBe("");
    expect(head.headers["content-type"]).toBe("text/javascript; charset=utf-8");
  });

  it("no path traversal on the wire: .., encoded dots and slashes, backslashes all get 404", async () => {
    for (const path of [
      "/dashboard/../package.json",
      "/dashboard/../../package.json",
      "/dashboard/js/../../../package.json",
      "/dashboard/%2e%2e/package.json",
      "/dashboard/%2e%2e%2f%2e%2e%2fpackage.json",
      "/dashboard/..%5c..%5cpackage.json",
      "/dashboard/js/..%2f..%2f..%2fpackage.json",
      "/dashboard/%2fetc%2fpasswd",
      "/dashboard//etc/passwd",
      "/dashboard/js/main.ts",
    ]) {
      const r = await rawGet(world.url, path);
      // A `..` that climbs out of /dashboard/ is not the dashboard's any more: then the API's own 404.
      expect([path, r.status]).toEqual([path, 404]);
      expect(r.body).not.toContain('"name": "mneme"');
      expect(r.body).not.toContain("root:");
    }
  });

  it("is off by default: without the option /dashboard/ is the API's 404; with a basePath it moves below it", async () => {
    const facade: Facade = createFacade({ appName: "no-dashboard" });
    await registerDefaults(facade, {
      admin: { email: "a@example.org", password: "admin-password-1" },
      passwordHashing: { N: 1024, r: 8, p: 1 },
    });
    await facade.start();
    try {
      const plain = createHttpHandler(facade);
      const off = await plain(new Request("http://127.0.0.1/dashboard/"));
      expect(off.status).toBe(404);
      expect(await off.json()).toMatchObject({ code: "NOT_FOUND" });
      expect((await plain(new Request("http://127.0.0.1/dashboard/js/main.js"))).status).toBe(404);

      const based = createHttpHandler(facade, { basePath: "/ops", dashboard: true });
      expect((await based(new Request("http://127.0.0.1/ops/dashboard/"))).status).toBe(200);
      expect((await based(new Request("http://127.0.0.1/dashboard/"))).status).toBe(404);
      const redirect = await based(new Request("http://127.0.0.1/ops/dashboard"));
      expect(redirect.status).toBe(308);
      expect(new URL(redirect.headers.get("location")!, "http://127.0.0.1/ops/dashboard").pathname).toBe("/ops/dashboard/");
      expect(() => createHttpHandler(facade, { dashboard: "yes" as unknown as boolean })).toThrow(/dashboard must be true or false/);
    } finally {
      await facade.stop();
    }
  });
});

// On CI a missing browser is a failed test, not only a failed hook.
it.runIf(onCi())("finds Chromium on CI", () => {
  expect(chromiumPath, NO_BROWSER).toBeDefined();
});

describe.skipIf(skipBrowser)(`the dashboard in Chromium${skipBrowser ? ` (skipped: ${NO_BROWSER})` : ""}`, () => {
  let pages: DashboardPages;

  beforeAll(async () => {
    if (chromiumPath === undefined) throw new Error(NO_BROWSER);
    pages = await dashboardPages(chromiumPath);
  }, 60_000);

  afterAll(async () => {
    await pages?.close();
  });

  /** A fresh browser profile (its own sessionStorage) whose console errors and CSP violations are collected. */
  const newPage = (viewport?: { width: number; height: number }): Promise<Page> => pages.newPage(viewport);

  const signIn = (page: Page, who: { email: string; password: string }, hash = "", url = world.url): Promise<void> =>
    pages.signIn(page, who, url, hash);

  it("refuses a wrong password with the server's answer and stays on the sign-in page", async () => {
    const page = await newPage();
    await page.goto(`${world.url}/dashboard/`);
    await page.fill("input[name=email]", ADMIN.email);
    await page.fill("input[name=password]", "not the password");
    await page.click("button[type=submit]");
    const banner = page.locator("[data-view=signin] [data-error-code]");
    await banner.waitFor();
    expect(await banner.getAttribute("data-error-code")).toBe("UNAUTHENTICATED");
    expect(await page.locator(".shell").count()).toBe(0);
  });

  it("signs in, shows system info and the handlers, restores TodoProjection from zero and watches it come back", async () => {
    const page = await newPage();
    await signIn(page, ADMIN);
    await page.waitForSelector("[data-view=overview] .kpis");
    expect(await page.locator(".kpi-value").first().innerText()).toBe("started");
    const info = world.facade.runtime.systemInfo();
    await poll(() => page.locator(".facts").first().innerText()).toContain(info.appName);

    await page.click("[data-nav=handlers]");
    const row = page.locator("tr[data-handler=TodoProjection]");
    await row.waitFor();
    expect(await row.getAttribute("data-state")).toBe("running");
    expect(await row.getAttribute("data-restoration")).toBe("restored");
    for (const h of world.facade.runtime.listEventHandlers()) {
      expect(await page.locator(`tr[data-handler="${h.eventHandlerName}"]`).count()).toBe(1);
    }

    const restores: { kind: string; fromZero?: unknown }[] = [];
    const unsubscribe = world.facade.runtime.systemEvents.subscribe((e) => {
      if (e.data.eventHandlerName === "TodoProjection" && e.kind.startsWith("Restore"))
        restores.push({ kind: e.kind, fromZero: e.data.fromZero });
    });
    try {
      // From zero rebuilds from the first event: the first click only asks for confirmation.
      await row.locator("[data-action=restore-zero]").click();
      expect(await row.locator("[data-action=restore-zero]").innerText()).toBe("Confirm: rebuild");
      expect(restores).toEqual([]);
      await row.locator("[data-action=restore-zero]").click();
      await row.locator("[data-outcome=ok]").waitFor();
      expect(await row.locator("[data-outcome]").innerText()).toBe("Restore from zero: now running / restored");
      await poll(() => row.getAttribute("data-restoration")).toBe("restored");
      expect(await row.getAttribute("data-state")).toBe("running");
    } finally {
      unsubscribe();
    }
    expect(restores[0]).toEqual({ kind: "RestoreStarted", fromZero: true });
    expect(restores.filter((r) => r.kind === "RestoreProgress").length).toBeGreaterThanOrEqual(3);
    expect(restores.at(-1)!.kind).toBe("RestoreCompleted");
    // Back: every todo is in the readmodel again, and the row shows the handler at the head.
    const list = await world.facade.query(ListTodos, { pageSize: 1000 }, { reqCtx: world.admin });
    expect(list.total).toBe(30);
    const head = world.facade.runtime.systemInfo().headPosition;
    await poll(() => row.locator("td.num").first().innerText()).toContain(
      `${head.toLocaleString("en-US")} / ${head.toLocaleString("en-US")}`,
    );

    // Its metrics tell what the restore did.
    const report = world.facade.runtime.getMetrics("TodoProjection").lastRestore!;
    await poll(() => row.locator("[data-last-restore]").innerText()).toContain(
      `last restore: ${report.eventsReplayed.toLocaleString("en-US")} replayed`,
    );

    // The live stream showed the restore too.
    await page.click("[data-nav=stream]");
    await page.locator("li[data-kind=RestoreCompleted]", { hasText: "TodoProjection" }).first().waitFor();
    expect(await page.locator("li[data-kind=RestoreProgress]", { hasText: "TodoProjection" }).count()).toBeGreaterThanOrEqual(3);
    expect(await page.locator("li[data-kind=RestoreStarted]", { hasText: "TodoProjection from zero" }).count()).toBe(1);
    // Throughput and lag charts are drawn as SVG.
    await page.click("[data-nav=handlers]");
    // (points come with the page's metrics polls: wait for the next ones)
    await poll(() => page.locator("[data-chart=throughput] svg path").count()).toBeGreaterThan(0);
    expect(await page.locator("[data-chart=lag] svg").count()).toBe(1);
  });

  it("shows a dispatched command in the live stream, resumes after a dropped connection with Last-Event-ID, and shows the gap when the server cannot resume", async () => {
    const page = await newPage();
    const sseRequests: (string | undefined)[] = [];
    const sseUrls: string[] = [];
    page.on("request", (r) => {
      if (!r.url().includes("/runtime/sse")) return;
      sseRequests.push(r.headers()["last-event-id"]);
      sseUrls.push(r.url());
    });
    await signIn(page, ADMIN, "#/stream");
    await page.waitForSelector("[data-stream-status=live]");

    const first = await world.createTodo("seen live");
    const line = page.locator("li[data-kind=CommandExecuted]", { hasText: "Todo.CreateTodo" }).first();
    await line.waitFor();
    await line.locator(".event-line").click();
    await poll(() => line.locator("pre.json").innerText()).toContain(first);

    // Hold every reconnect until the test lets it through, so what happens meanwhile is missed for sure.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    await page.route("**/runtime/sse*", async (route: Route) => {
      await gate;
      await route.continue();
    });
    const lastSeen = await page.evaluate(() => document.querySelector("li[data-kind][data-id]")!.getAttribute("data-id"));
    world.dropConnections();
    await page.waitForSelector("[data-stream-status=reconnecting]");
    const missed = await world.createTodo("missed while disconnected");
    release();
    await page.waitForSelector("[data-stream-status=live]");
    // The reconnect asked to resume after the last id the page had, and the server replayed what was missed.
    expect(sseRequests.length).toBeGreaterThanOrEqual(2);
    expect(sseRequests[0]).toBeUndefined();
    expect(Number(sseRequests.at(-1))).toBeGreaterThanOrEqual(Number(lastSeen));
    const replayed = page.locator("li[data-kind=CommandExecuted]", { hasText: "Todo.CreateTodo" }).first();
    await replayed.locator(".event-line").click();
    await poll(() => replayed.locator("pre.json").innerText()).toContain(missed);
    expect(await page.locator("li[data-kind=gap]").count()).toBe(0);
    // Nothing twice: every event id on the page is unique.
    const ids = await page.locator("li[data-id]").evaluateAll((els) => els.map((e) => e.getAttribute("data-id")));
    expect(new Set(ids).size).toBe(ids.length);

    // Now miss more than the server's buffer holds (40 events): it cannot resume exactly and says so.
    let release2!: () => void;
    const gate2 = new Promise<void>((r) => (release2 = r));
    await page.unroute("**/runtime/sse*");
    await page.route("**/runtime/sse*", async (route: Route) => {
      await gate2;
      await route.continue();
    });
    world.dropConnections();
    await page.waitForSelector("[data-stream-status=reconnecting]");
    await world.createTodos(30);
    release2();
    const gapLine = page.locator("li[data-kind=gap]");
    await gapLine.waitFor();
    expect(await gapLine.innerText()).toContain("buffer-overflow");
    await page.waitForSelector("[data-stream-status=live]");
    await page.unroute("**/runtime/sse*");

    // Every tenant by default (administrators); unticked, the stream of the session's tenant, resumed where it was.
    expect(new URL(sseUrls.at(-1)!).searchParams.get("allTenants")).toBe("true");
    const before = sseUrls.length;
    await page.locator("label.check input").uncheck();
    await poll(() => sseUrls.length).toBeGreaterThan(before);
    expect(new URL(sseUrls.at(-1)!).searchParams.get("allTenants")).toBeNull();
    expect(sseRequests.at(-1)).toBeDefined();
    await page.waitForSelector("[data-stream-status=live]");
    await world.createTodo("after the switch");
    await page.locator("li[data-kind=CommandExecuted]").first().waitFor();
  });

  it("shows a failed command among the overview's recent failures, with the server's code", async () => {
    const page = await newPage();
    await signIn(page, ADMIN);
    await page.waitForSelector("[data-stream-status=live]");
    const todoUuid = newUuid();
    await world.facade.dispatch(CreateTodo, { todoUuid, title: "once" }, { reqCtx: world.admin });
    await expect(world.facade.dispatch(CreateTodo, { todoUuid, title: "twice" }, { reqCtx: world.admin })).rejects.toThrow(/exists/);
    // The card lists the server's failure history, newest first: earlier tests' failures are there too.
    const failed = page.locator(".failures li[data-kind=CommandFailed]", { hasText: "Todo.CreateTodo failed: CONFLICT" }).first();
    await failed.waitFor();
    expect(await page.locator(".failures li").first().innerText()).toContain("Todo.CreateTodo failed: CONFLICT");
  });

  it("shows failures that happened before the page opened, from the Runtime's failure history", async () => {
    const todoUuid = newUuid();
    await world.facade.dispatch(CreateTodo, { todoUuid, title: "before" }, { reqCtx: world.admin });
    await expect(world.facade.dispatch(CreateTodo, { todoUuid, title: "again" }, { reqCtx: world.admin })).rejects.toThrow(/exists/);
    const page = await newPage();
    await signIn(page, ADMIN);
    const failed = page.locator(".failures[data-source=runtime] li[data-kind=CommandFailed]").first();
    await failed.waitFor();
    expect(await failed.innerText()).toContain("Todo.CreateTodo failed: CONFLICT");
  });

  it("lists dead letters and scheduled commands of the tenant, retries, discards and cancels them; another tenant's operator sees none", async () => {
    await world.createUndeliverable("letter");
    await world.createReminder("later");
    const runtime = world.facade.runtime;
    const [dead] = await runtime.listDeadLetters({ eventHandlerName: "Notifier" });
    const [scheduled] = await runtime.listScheduledCommands({ eventHandlerName: "Reminders" });
    expect(dead).toBeDefined();
    expect(scheduled).toBeDefined();

    const page = await newPage();
    await signIn(page, ADMIN, "#/dead-letters");
    const letter = page.locator(`[data-view=dead-letters] tr[data-entry="${dead!.id}"]`);
    await letter.waitFor();
    expect(await letter.innerText()).toContain('no mailbox for "undeliverable: letter"');
    await letter.locator("[data-action=retry]").click();
    await page.locator(`[data-view=dead-letters] [data-outcome=ok]`).first().waitFor();
    // Retried: pending again; its one attempt fails again, and it is back among the dead letters.
    await poll(async () => (await runtime.listDeadLetters({ eventHandlerName: "Notifier" })).map((e) => e.id)).toContain(dead!.id);
    await poll(() => letter.count()).toBe(1);
    await letter.locator("[data-action=discard]").click();
    expect(await letter.locator("[data-action=discard]").innerText()).toBe("Confirm: discard");
    await letter.locator("[data-action=discard]").click();
    await page.locator(`[data-entry-gone="${dead!.id}"][data-outcome=ok]`).waitFor();
    expect((await runtime.listDeadLetters()).map((e) => e.id)).not.toContain(dead!.id);

    await page.click("[data-nav=scheduled]");
    const entry = page.locator(`[data-view=scheduled] tr[data-entry="${scheduled!.commandUuid}"]`);
    await entry.waitFor();
    expect(await entry.innerText()).toContain("Todo.CompleteTodo");
    await entry.locator("[data-action=cancel]").click();
    await entry.locator("[data-action=cancel]").click();
    await page.locator(`[data-entry-gone="${scheduled!.commandUuid}"][data-outcome=ok]`).waitFor();
    expect((await runtime.listScheduledCommands()).map((e) => e.commandUuid)).not.toContain(scheduled!.commandUuid);

    // The operator of the Operations tenant: its tenant's lists, which hold none of the system tenant's entries.
    await world.createReminder("system tenant only");
    const ops = await newPage();
    await signIn(ops, OPERATOR, "#/scheduled");
    await ops.locator("[data-view=scheduled] [data-scope=tenant]").waitFor();
    await ops.locator("[data-view=scheduled] .empty-note").waitFor();
    expect(await ops.locator("[data-view=scheduled] tr[data-entry]").count()).toBe(0);
    expect((await runtime.listScheduledCommands()).length).toBeGreaterThan(0);
  });

  it("lists every command, query and event with its permission, and shows a payload's JSON Schema", async () => {
    const page = await newPage();
    await signIn(page, ADMIN, "#/catalog");
    const runtime = world.facade.runtime;
    await poll(() => page.locator("tr[data-message]").count()).toBe(runtime.listCommands().length);
    const create = page.locator("tr[data-message='Todo.CreateTodo']");
    expect(await create.locator(".badge").innerText()).toBe(
      runtime.listCommands().find((c) => c.domainCmdName === "CreateTodo")!.permission,
    );
    expect(await page.locator("tr[data-message='Runtime.ControlEventHandler'] .badge").innerText()).toBe("Administrator");
    // The application's own domains come first, the built-in ones (Runtime, Account, ...) after them.
    expect(await page.locator("tr[data-message]").first().getAttribute("data-message")).toMatch(/^(Todo|Desk)\./);
    expect(await page.locator("tr[data-message]").last().getAttribute("data-message")).toMatch(
      /^(Runtime|Tenant|Account|Identity|Group)\./,
    );
    // A command without a schema: a neutral note, not an error.
    await page.locator("tr[data-message='Desk.Ping']").click();
    await page.locator("[data-schema] [data-no-schema]").waitFor();
    expect(await page.locator("[data-schema] [data-error-code]").count()).toBe(0);
    await create.click();
    const schema = page.locator("[data-schema] pre.json");
    await schema.waitFor();
    const shown = JSON.parse(await schema.innerText());
    expect(shown).toEqual(
      await world.facade.query({ domain: "Runtime", name: "GetSchema" }, { domain: "Todo", type: "CreateTodo" }, { reqCtx: world.admin }),
    );
    await page.locator("[role=tab]", { hasText: "Queries" }).click();
    await poll(() => page.locator("tr[data-message]").count()).toBe(runtime.listQueries().length);
    await page.locator("[role=tab]", { hasText: "Events" }).click();
    await poll(() => page.locator("tr[data-message]").count()).toBe(runtime.listEvents().length);
    await page.fill("input[type=search]", "todocreated");
    await poll(() => page.locator("tr[data-message]").allInnerTexts()).toEqual([expect.stringContaining("TodoCreated")]);
  });

  it("lets a non-administrator read the Runtime of its tenant but the server refuses it the stores, the stream and the controls", async () => {
    const admin = await newPage();
    await signIn(admin, ADMIN, "#/stores");
    const entries = admin.locator("[data-entries=event]");
    await entries.waitFor();
    expect(await entries.locator(".entry-list > li").count()).toBeGreaterThan(0);
    expect(await admin.locator(".facts").first().innerText()).toContain("memory");

    const ops = await newPage();
    await signIn(ops, OPERATOR, "#/stores");
    const refused = ops.locator("[data-store-error] [data-error-code]");
    await refused.waitFor();
    expect(await refused.getAttribute("data-error-code")).toBe("PERMISSION_DENIED");
    for (const store of ["command", "data", "cache", "log"]) {
      await ops.click(`[data-store=${store}]`);
      await poll(() => ops.locator("[data-store-error] [data-error-code]").getAttribute("data-error-code")).toBe("PERMISSION_DENIED");
    }
    // The same server answer without the page: the refusal is the server's, not the page's.
    const login = await (
      await fetch(`${world.url}/api/sessions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(OPERATOR),
      })
    ).json();
    const direct = await fetch(`${world.url}/api/tenants/${world.opsTenantUuid}/runtime/stores/event/entries`, {
      headers: { authorization: `Bearer ${login.token}`, "x-identity-uuid": login.identities[0].identityUuid },
    });
    expect(direct.status).toBe(403);

    // The operator sees the handlers (Runtime.* in its tenant) but may not stop one, nor read the stream.
    await ops.click("[data-nav=handlers]");
    const row = ops.locator("tr[data-handler=TodoProjection]");
    await row.waitFor();
    await row.locator("[data-action=stop]").click();
    await row.locator("[data-outcome=refused]").waitFor();
    expect(await row.locator("[data-outcome]").innerText()).toContain("PERMISSION_DENIED");
    expect(world.facade.runtime.listEventHandlers().find((h) => h.eventHandlerName === "TodoProjection")!.state).toBe("running");
    await ops.click("[data-nav=stream]");
    await ops.waitForSelector("[data-stream-status=refused]");
  });

  it("shows a broker's publisher and consumer in the Integration panel: kind, broker, connection, lag, handled, dead letters, last error", async () => {
    const nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });
    const jsm = await jetstreamManager(nc);
    const stream = `DASH_${newUuid().replace(/-/g, "").slice(-10)}`.toUpperCase();
    await jsm.streams.add({ name: stream, subjects: [`${stream}.>`], storage: "memory" as never });
    let linked: DashboardWorld | undefined;
    try {
      linked = await startDashboardWorld({
        register: (f) => {
          const out = new NatsPublisher(f, { name: "TodosOut", domain: "Todo", connection: nc, stream, pollMs: 50 });
          f.registerReadmodel(out.on(TodoCreated, (e) => ({ subject: `${stream}.todo.created`, body: { todoUuid: e.aggregateUuid } })));
          // Every message is taken without a command; one that is not JSON is a dead letter at once.
          f.registerReadmodel(
            new NatsConsumer(f, { name: "TodosIn", domain: "Todo", connection: nc, stream, durable: "in", toCommand: () => undefined }),
          );
        },
      });
      await linked.createTodos(3);
      const js = jetstream(nc);
      await js.publish(`${stream}.in`, new TextEncoder().encode('{"ok":true}'), { msgID: newUuid() });
      await js.publish(`${stream}.in`, new TextEncoder().encode("not json"), { msgID: newUuid() });
      const listed = (name: string) => linked!.facade.runtime.listEventHandlers().find((x) => x.name === name)?.integration;
      await poll(() => listed("TodosOut")?.handled).toBe(3);
      await poll(() => listed("TodosIn")?.deadLetters).toBe(1);

      const page = await newPage();
      await signIn(page, ADMIN, "#/handlers", linked.url);
      const out = page.locator("tr[data-integration=TodosOut]");
      const inn = page.locator("tr[data-integration=TodosIn]");
      await out.waitFor();
      expect(await out.getAttribute("data-role")).toBe("publisher");
      expect(await inn.getAttribute("data-role")).toBe("consumer");
      await poll(() => out.getAttribute("data-connected")).toBe("true");
      await poll(() => inn.getAttribute("data-connected")).toBe("true");
      expect(await out.locator("td[data-label=Broker]").innerText()).toBe("nats");
      expect(await out.locator("td.handler .sub").innerText()).toBe(stream);
      expect(await inn.locator("td.handler .sub").innerText()).toBe(`${stream}/in`);
      await poll(() => out.locator("td[data-label=Handled]").innerText()).toBe("3");
      await poll(() => out.locator("td[data-label=Lag]").innerText()).toBe("0");
      await poll(() => inn.locator("td[data-label=Handled]").innerText()).toContain("1");
      await poll(() => inn.locator("td[data-label='Dead letters']").innerText()).toBe("1");
      await poll(() => inn.locator("td[data-label='Last error']").innerText()).toContain("not JSON");
      // The handler's own row says what it links to; a handler of no broker has neither.
      expect(await page.locator("tr[data-handler=TodosIn] [data-link=consumer]").innerText()).toBe(`nats consumer · ${stream}/in`);
      expect(await page.locator("tr[data-integration=TodoProjection]").count()).toBe(0);
      expect(await page.locator("tr[data-handler=TodoProjection] [data-link]").count()).toBe(0);
    } finally {
      await linked?.close();
      await jsm.streams.delete(stream).catch(() => undefined);
      await nc.close();
    }
  });

  it("shows a sharded app's shards and placements on the overview to an administrator, and nothing to an operator without the grant", async () => {
    const tenant = newUuid();
    // What every shard's facade of a createShardedApp answers (test/shards/shards-runtime.int.test.ts checks those answers).
    const source = {
      listShards: () =>
        Promise.resolve([
          { name: "eu-1", description: "127.0.0.1:5432/app schema eu1", home: true, tenants: 1, head: 1234, frozenTenants: [] },
          { name: "eu-2", description: "127.0.0.1:5433/app schema eu2", home: false, tenants: 0, head: 7, frozenTenants: [tenant] },
        ]),
      placements: () =>
        Promise.resolve([{ tenantUuid: tenant, shard: "eu-1", state: "paused" as const, version: 3, updatedAt: Date.now() }]),
      moves: () => Promise.resolve([]),
    };
    const sharded = await startDashboardWorld({
      register: (f) => void f.registerDomain(ShardsDomain, (d) => installShardsDomain(d, source, f)),
    });
    try {
      const page = await newPage();
      await signIn(page, ADMIN, "", sharded.url);
      const home = page.locator("tr[data-shard=eu-1]");
      await home.waitFor();
      expect(await home.locator("td[data-label='Head position']").innerText()).toBe("1,234");
      expect(await home.locator("td.handler").innerText()).toContain("home");
      expect(await page.locator("tr[data-shard=eu-2] td[data-label='Frozen tenants']").innerText()).toBe(tenant);
      const placed = page.locator(`tr[data-placement='${tenant}']`);
      expect(await placed.locator("td[data-label=Shard]").innerText()).toBe("eu-1");
      expect(await placed.locator("td[data-label=State]").innerText()).toBe("paused");
      // The operator's group grants Runtime.* and Todo.*, not Shards.*: no panel.
      const ops = await newPage();
      await signIn(ops, OPERATOR, "", sharded.url);
      await ops.waitForSelector(".kpis");
      expect(await ops.locator("tr[data-shard]").count()).toBe(0);
      // A plain app has no Shards queries: no panel either.
      const plain = await newPage();
      await signIn(plain, ADMIN, "");
      await plain.waitForSelector(".kpis");
      expect(await plain.locator("tr[data-shard]").count()).toBe(0);
    } finally {
      await sharded.close();
    }
  });

  it("keeps every handler's buttons on screen without a horizontal scroll at 1400 and 800 px, with four-digit positions", async () => {
    const big = await startDashboardWorld();
    try {
      for (let round = 0; round < 10; round++)
        await Promise.all(Array.from({ length: 100 }, (_, i) => big.createTodo(`bulk ${round}-${i}`)));
      const head = big.facade.runtime.systemInfo().headPosition;
      expect(head).toBeGreaterThanOrEqual(1000);
      for (const width of [1400, 800]) {
        const page = await newPage({ width, height: 900 });
        await signIn(page, ADMIN, "#/handlers", big.url);
        const row = page.locator("tr[data-handler=TodoProjection]");
        await row.waitFor();
        await poll(() => row.locator("td.num").first().innerText()).toMatch(/^\d,\d{3} \/ \d,\d{3}/);
        const layout = await page.evaluate(() => {
          const wrap = document.querySelector("[data-view=handlers] .table-wrap")!;
          const buttons = Array.from(document.querySelectorAll("table.handlers [data-action]"), (b) => b.getBoundingClientRect());
          return {
            viewport: document.documentElement.clientWidth,
            scroll: wrap.scrollWidth - wrap.clientWidth,
            buttons: buttons.length,
            offScreen: buttons.filter((r) => r.left < 0 || r.right > document.documentElement.clientWidth).length,
            pageScroll: document.documentElement.scrollWidth - document.documentElement.clientWidth,
          };
        });
        expect(layout.buttons, `${width} px`).toBeGreaterThanOrEqual(2 * big.facade.runtime.listEventHandlers().length);
        expect({ width, scroll: layout.scroll, offScreen: layout.offScreen, pageScroll: layout.pageScroll }).toEqual({
          width,
          scroll: 0,
          offScreen: 0,
          pageScroll: 0,
        });
      }
    } finally {
      await big.close();
    }
  }, 120_000);

  it("ran without a script error or a CSP violation", () => {
    expect(pages.problems).toEqual([]);
  });
});
