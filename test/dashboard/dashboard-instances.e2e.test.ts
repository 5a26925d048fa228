/**
 * The dashboard's sign-in behind a load balancer: two instances on one
 * Postgres schema, each a facade with the built-in domains and its own HTTP
 * server serving the dashboard, and a round-robin proxy on 127.0.0.1 in
 * front of them that sends each request to the other instance than the one
 * before. So the sign-in form comes from one instance, the login goes to
 * one, and the overview's first requests with the fresh token go to the
 * other. Ten sign-ins in Chromium: none bounces back to the sign-in page
 * ("Your session ended…"), and the overview shows no failures (nothing
 * failed).
 *
 * Without Chromium the test is skipped with the reason, unless CI is set.
 */
import { createServer, request } from "node:http";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFacade, type Facade } from "mneme";
import { accountRoutes, registerDefaults } from "mneme/defaults";
import { createPostgresBackends } from "mneme/postgres";
import { browserGate } from "../support/chromium.js";
import { type DashboardPages, dashboardPages } from "../support/dashboard-pages.js";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING } from "../support/defaults-world.js";
import { listenLocal, serve } from "../support/http-fixture.js";
import { postgresScratch } from "../support/postgres-scratch.js";
import { runProcess } from "../support/run-process.js";

const root = join(import.meta.dirname, "..", "..");
const { chromiumPath, skip: skipBrowser, reason: NO_BROWSER } = browserGate("test/dashboard/dashboard-instances.e2e.test.ts");
const pg = postgresScratch("mneme_dash_instances");
const ADMIN = { email: ADMIN_EMAIL, password: ADMIN_PASSWORD };

const closers: (() => Promise<void>)[] = [];

/** One instance: a facade on the shared schema with the built-in domains, and its HTTP server with the dashboard. */
async function instance(schema: string): Promise<{ facade: Facade; url: string }> {
  const facade = createFacade({ appName: "signin", systemEvents: true, ...createPostgresBackends({ pool: pg.newPool(), schema }) });
  await registerDefaults(facade, {
    admin: ADMIN,
    passwordHashing: FAST_HASHING,
    sessionSecret: "one secret for every instance",
  });
  await facade.start();
  closers.push(() => facade.stop());
  const routes = accountRoutes();
  // The module's own resolver (the fixture's default is a test resolver).
  const server = await serve(facade, { dashboard: true, modules: [routes], resolveCredentials: routes.resolveCredentials! });
  closers.push(server.close);
  return { facade, url: server.url };
}

/** A round-robin proxy: each request goes to the next of `targets`, with its method, path, headers and body. */
async function roundRobin(targets: readonly string[]): Promise<{ url: string; served: Map<string, number> }> {
  let next = 0;
  const served = new Map<string, number>(targets.map((t) => [t, 0]));
  const server = createServer((req, res) => {
    const target = targets[next++ % targets.length]!;
    served.set(target, served.get(target)! + 1);
    const { hostname, port } = new URL(target);
    const upstream = request({ host: hostname, port, path: req.url, method: req.method, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode!, up.headers);
      up.pipe(res);
    });
    upstream.on("error", () => res.destroy());
    // A closed page ends its stream: end the upstream request with it.
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  const listening = await listenLocal(server);
  closers.push(listening.close);
  return { url: listening.url, served };
}

const WAIT = { timeout: 15_000 };

/**
 * What the page shows after the sign-in form was sent: "ok" after the overview, the handlers
 * page and the overview again have loaded (their requests carry the fresh
 * token to both instances) with the live stream on and no failures listed;
 * else what went wrong (the sign-in page's notice when it bounced).
 */
async function afterSignIn(page: Page): Promise<string> {
  const bounced = async () => `bounced: ${(await page.locator("[data-view=signin] .banner").allInnerTexts()).join(" | ")}`;
  const overview = "[data-view=overview] .kpis";
  for (const [step, selector] of [
    ["overview", overview],
    ["stream", "[data-stream-status=live]"],
    ["handlers", "tr[data-handler]"],
    ["overview again", overview],
  ] as const) {
    if (step === "handlers") await page.click("[data-nav=handlers]");
    if (step === "overview again") await page.click("[data-nav=overview]");
    // Whichever comes first: the page the step waits for, or the sign-in page with a notice (bounced) or an error.
    await page.waitForSelector(`${selector}, [data-view=signin] .banner`, WAIT);
    if ((await page.locator("[data-view=signin]").count()) > 0) return `${step}: ${await bounced()}`;
  }
  const failures = await page.locator(".failures li").allInnerTexts();
  return failures.length === 0 ? "ok" : `failures: ${failures.join(" | ")}`;
}

describe.skipIf(skipBrowser)("the dashboard's sign-in with two instances on Postgres behind a round-robin proxy", () => {
  let pages: DashboardPages;
  let proxy: { url: string; served: Map<string, number> };
  let a: { facade: Facade; url: string };
  let b: { facade: Facade; url: string };

  beforeAll(async () => {
    if (chromiumPath === undefined) throw new Error(NO_BROWSER);
    // The instances serve what `npm run build` builds: build the dashboard from the current sources.
    const build = await runProcess(process.execPath, [join(root, "scripts", "build-dashboard.mjs")], root, 120_000);
    expect(build.code, build.stderr + build.stdout).toBe(0);
    const schema = pg.newSchema();
    a = await instance(schema);
    b = await instance(schema);
    proxy = await roundRobin([a.url, b.url]);
    pages = await dashboardPages(chromiumPath);
  }, 180_000);

  afterAll(async () => {
    await pages?.close();
    for (const c of closers.splice(0).reverse()) await c().catch(() => undefined);
  });

  it("signs in 10 times out of 10: never bounced to the sign-in page, no failures on the overview", async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 10; i++) {
      const page = await pages.newPage();
      await page.goto(`${proxy.url}/dashboard/`);
      await page.fill("input[name=email]", ADMIN.email);
      await page.fill("input[name=password]", ADMIN.password);
      await page.click("button[type=submit]");
      outcomes.push(await afterSignIn(page));
      await page.context().close();
    }
    expect(outcomes).toEqual(Array.from({ length: 10 }, () => "ok"));
    expect(pages.problems).toEqual([]);
    // The proxy did alternate: both instances answered the pages.
    expect(Math.min(...proxy.served.values())).toBeGreaterThan(20);
  }, 300_000);
});
