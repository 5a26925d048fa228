/**
 * The dashboard follows live queries, not polls: in headless Chromium, the
 * handlers page of an administrator shows a readmodel's "Processed" count
 * move as todos are created elsewhere (by the facade, not the page), and
 * while it moves, and for longer than the old two-second poll after it, the
 * page sends no request at all: every result came down the one live-query
 * stream it opened (`GET .../live-queries?queries=[...]`).
 * On SQLite, and on Postgres with two instances: the todos are created
 * through instance B and appear on the dashboard served by instance A.
 *
 * Without Chromium the test is skipped with the reason, unless CI is set.
 */
import { join } from "node:path";
import type { Page, Request } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Facade, createFacade, newUuid } from "mneme";
import { registerDefaults } from "mneme/defaults";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { CreateTodo, registerTodo } from "../../examples/todo/todo-domain.js";
import { browserGate } from "../support/chromium.js";
import { ADMIN, type DashboardWorld, startDashboardWorld } from "../support/dashboard-fixture.js";
import { type DashboardPages, dashboardPages } from "../support/dashboard-pages.js";
import { postgresScratch } from "../support/postgres-scratch.js";
import { runProcess } from "../support/run-process.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const root = join(import.meta.dirname, "..", "..");
const { chromiumPath, skip: skipBrowser } = browserGate("test/dashboard/dashboard-live.e2e.test.ts");
const pg = postgresScratch("mneme_dash_live");
const sqlite = sqliteScratch("dash-live");
const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 20_000, interval: 50 });

let pages: DashboardPages;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  if (skipBrowser) return;
  // The test serves what `npm run build` builds: build the dashboard from the current sources.
  const build = await runProcess(process.execPath, [join(root, "scripts", "build-dashboard.mjs")], root, 120_000);
  expect(build.code, build.stderr + build.stdout).toBe(0);
  pages = await dashboardPages(chromiumPath!);
}, 180_000);

afterAll(async () => {
  for (const c of closers.splice(0).reverse()) await c().catch(() => undefined);
  await pages?.close();
});

async function world(backends: object): Promise<DashboardWorld> {
  const w = await startDashboardWorld({ facade: backends });
  closers.push(() => w.close());
  return w;
}

/** The handlers page's "Processed" count of a handler, as a number. */
async function processed(page: Page, handler: string): Promise<number> {
  const text = await page.locator(`tr[data-handler="${handler}"] td[data-label=Processed]`).innerText();
  return Number(text.split("\n")[0]!.replace(/[^\d]/g, ""));
}

/**
 * Signs the administrator in on the handlers page of `w`, lets the page open
 * its streams, then runs `change` (3 todos made elsewhere) and checks that the
 * page shows them with no request sent meanwhile.
 */
async function followsWithoutRequests(w: DashboardWorld, change: () => Promise<void>): Promise<void> {
  const page = await pages.newPage();
  const requests: string[] = [];
  const onRequest = (r: Request) => requests.push(`${r.method()} ${new URL(r.url()).pathname}${new URL(r.url()).search}`);
  page.on("request", onRequest);
  await pages.signIn(page, ADMIN, w.url, "#/handlers");
  await page.locator('tr[data-handler="TodoProjection"]').waitFor();
  await page.waitForSelector("[data-stream-status=live]");
  // The page's live queries share one stream: opened, then once more when system info named the Tenant domain.
  const sets = () =>
    requests
      .filter((r) => r.startsWith("GET ") && r.includes("/live-queries?"))
      .map((r) => JSON.parse(new URL(r.slice(4), w.url).searchParams.get("queries")!) as { id: string; name: string }[]);
  await poll(() => sets().some((set) => set.some((q) => q.name === "ListTenants"))).toBe(true);
  await page.waitForTimeout(500);
  const opened = [...requests];
  const last = sets()
    .at(-1)!
    .map((q) => q.name);
  expect(last).toEqual(expect.arrayContaining(["GetSystemInfo", "ListEventHandlers", "GetMetrics", "ListFailures", "ListTenants"]));
  expect(sets().length).toBeLessThanOrEqual(3);
  // Nothing read otherwise: no runtime list, no query by POST (the sign-in is the one POST).
  expect(opened.filter((r) => r.includes("/runtime/event-handlers") || r.includes("/runtime/metrics") || r.startsWith("POST "))).toEqual([
    "POST /api/sessions",
  ]);

  const before = await processed(page, "TodoProjection");
  requests.length = 0;
  await change();
  await poll(() => processed(page, "TodoProjection")).toBe(before + 3);
  // Longer than the two-second poll the page used to run: still nothing asked.
  await new Promise((r) => setTimeout(r, 2500));
  expect(requests).toEqual([]);
  expect(pages.problems).toEqual([]);
  page.off("request", onRequest);
  await page.close();
}

describe.skipIf(skipBrowser)("the dashboard follows live queries, no polling", () => {
  it("SQLite: todos created by the facade move the handlers page, with no request while it moves", { timeout: 120_000 }, async () => {
    const w = await world(createSqliteBackends({ filename: sqlite.newFile() }));
    await followsWithoutRequests(w, async () => {
      for (let i = 0; i < 3; i++) await w.createTodo(`live ${i}`);
    });
  });

  it(
    "Postgres, two instances: todos created through instance B appear on the dashboard served by A, with no request",
    { timeout: 120_000 },
    async () => {
      const schema = pg.newSchema();
      const a = await world(createPostgresBackends({ pool: pg.newPool(), schema }));
      // Instance B: the same app's domains on the same schema, started after A (A holds the readmodels' locks).
      const b: Facade = createFacade({ appName: "todo-ops", ...createPostgresBackends({ pool: pg.newPool(), schema }) });
      await registerDefaults(b, { admin: { ...ADMIN, name: "Ada Admin" }, passwordHashing: { N: 1024, r: 8, p: 1 } });
      registerTodo(b);
      await b.start();
      closers.push(() => b.stop());
      await followsWithoutRequests(a, async () => {
        for (let i = 0; i < 3; i++) await b.dispatch(CreateTodo, { todoUuid: newUuid(), title: `from B ${i}` }, { reqCtx: a.admin });
      });
    },
  );
});
