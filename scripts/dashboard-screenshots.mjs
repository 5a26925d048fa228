#!/usr/bin/env node
/**
 * Regenerates the screenshots of docs/dashboard.md (docs/images/dashboard-*.png):
 * starts the dashboard fixture of the tests (the Todo example with the built-in
 * domains, in memory, behind node:http), drives headless Chromium through a
 * session with some traffic, and captures each view.
 * Usage: npm run screenshots   (builds the dashboard, then node --import tsx scripts/dashboard-screenshots.mjs)
 * Needs Chromium: CHROMIUM_PATH, or chromium on the PATH (apt-get install chromium).
 */
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = join(ROOT, "docs", "images");
const { ADMIN, OPERATOR, startDashboardWorld } = await import("../test/support/dashboard-fixture.ts");
const { findChromium, launchChromium } = await import("../test/support/chromium.ts");
const { CreateTodo } = await import("../examples/todo/todo-domain.ts");

const executable = findChromium();
if (executable === undefined) {
  console.error("dashboard-screenshots: no Chromium found; set CHROMIUM_PATH or apt-get install chromium");
  process.exit(1);
}
mkdirSync(OUT, { recursive: true });
const world = await startDashboardWorld();
const browser = await launchChromium(executable);
const { setTimeout: sleep } = await import("node:timers/promises");
const shot = async (page, name) => {
  await page.screenshot({ path: join(OUT, `dashboard-${name}.png`) });
  console.log(`docs/images/dashboard-${name}.png`);
};

try {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  await page.goto(`${world.url}/dashboard/`);
  await page.waitForSelector("[data-view=signin]");
  await page.fill("input[name=email]", ADMIN.email);
  await shot(page, "signin");
  await page.fill("input[name=password]", ADMIN.password);
  await page.click("button[type=submit]");
  await page.waitForSelector("[data-view=overview] .kpis");

  // Traffic in waves for about 40 s, so the charts have a shape.
  await world.createTodos(40);
  for (let i = 0; i < 20; i++) {
    await world.createTodos(5 + ((i * 7) % 23));
    await sleep(2000);
  }
  // One command that fails (the todo exists: CONFLICT), so the overview shows its failures card.
  const todoUuid = "0190f5e4-0000-7000-8000-00000000e001";
  await world.facade.dispatch(CreateTodo, { todoUuid, title: "Ship it" }, { reqCtx: world.admin });
  await world.facade.dispatch(CreateTodo, { todoUuid, title: "Ship it again" }, { reqCtx: world.admin }).catch(() => undefined);
  await page.waitForSelector(".failures li[data-kind=CommandFailed]");
  await shot(page, "overview");

  await page.click("[data-nav=handlers]");
  await page.waitForSelector("tr[data-handler=TodoProjection]");
  await world.createTodos(10);
  await sleep(2500);
  await shot(page, "handlers");

  await page.click("[data-nav=stream]");
  await page.waitForSelector("[data-stream-status=live]");
  // A mix of kinds: a handler stopped and started, a restore from zero, commands.
  const control = (action, eventHandlerName, restoreFromZero) =>
    world.facade.runtime.controlEventHandler({ action, eventHandlerName, ...(restoreFromZero ? { restoreFromZero } : {}) });
  await control("stop", "GroupProjection");
  await control("start", "GroupProjection");
  await control("restore", "TodoProjection", true);
  await world.createTodos(3);
  await page.waitForSelector("li[data-kind=CommandExecuted]");
  await page.click("li[data-kind=CommandExecuted] .event-line");
  await sleep(300);
  await shot(page, "stream");

  await page.click("[data-nav=catalog]");
  await page.waitForSelector("tr[data-message='Todo.CreateTodo']");
  await page.fill("input[type=search]", "todo");
  await page.click("tr[data-message='Todo.CreateTodo']");
  await page.waitForSelector("[data-schema] pre.json");
  await shot(page, "catalog");

  await page.click("[data-nav=stores]");
  await page.waitForSelector("[data-entries=event]");
  await page.click("[data-entries=event] details summary");
  await sleep(200);
  await shot(page, "stores");

  // Reactions: a reactor's dead letters and a process manager's scheduled commands.
  await world.createUndeliverable("weekly digest");
  await world.createUndeliverable("invoice 2026-118");
  await world.createReminder("renew the certificate");
  await world.createReminder("call back the supplier");
  await page.click("[data-nav=dead-letters]");
  await page.waitForSelector("[data-view=dead-letters] tr[data-entry]");
  await shot(page, "dead-letters");
  await page.click("[data-nav=scheduled]");
  await page.waitForSelector("[data-view=scheduled] tr[data-entry]");
  await shot(page, "scheduled");

  // The handlers page on a narrow screen: one card per handler, every button on screen.
  const narrow = await (await browser.newContext({ viewport: { width: 800, height: 1000 }, deviceScaleFactor: 1 })).newPage();
  await narrow.goto(`${world.url}/dashboard/#/handlers`);
  await narrow.fill("input[name=email]", ADMIN.email);
  await narrow.fill("input[name=password]", ADMIN.password);
  await narrow.click("button[type=submit]");
  await narrow.waitForSelector("tr[data-handler=TodoProjection]");
  await sleep(500);
  await shot(narrow, "handlers-narrow");

  // The operator may read the Runtime of its tenant, never the stores: the server refuses.
  const ops = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
  await ops.goto(`${world.url}/dashboard/#/stores`);
  await ops.fill("input[name=email]", OPERATOR.email);
  await ops.fill("input[name=password]", OPERATOR.password);
  await ops.click("button[type=submit]");
  await ops.waitForSelector("[data-store-error]");
  await shot(ops, "stores-refused");
} finally {
  await browser.close();
  await world.close();
}
