/**
 * The dashboard at a real app's size, in Chromium at 1400 and 800 px: 90 dead
 * letters of two reactors are paged 20 at a time, grouped by handler or by
 * error, and retried or discarded in bulk (one Runtime command each, with its
 * permission); tenants read by name, the instance by host and process; a
 * plain app sends no Shards query; a handler that processed nothing shows
 * "—", not "0 µs / 0 µs".
 */
import { hostname } from "node:os";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defineDomain, ProjectionReadmodel } from "mneme";
import { Reactor } from "mneme/reactions";
import { TodoCreated } from "../../examples/todo/todo-domain.js";
import { browserGate } from "../support/chromium.js";
import { ADMIN, type DashboardWorld, startDashboardWorld } from "../support/dashboard-fixture.js";
import { type DashboardPages, dashboardPages } from "../support/dashboard-pages.js";
import { until } from "../support/until.js";

const { chromiumPath, skip, reason } = browserGate("test/dashboard/dashboard-at-size.e2e.test.ts");
const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 20_000, interval: 50 });
const LETTERS = 45;

describe.skipIf(skip)(`the dashboard at a real app's size, in Chromium${skip ? ` (skipped: ${reason})` : ""}`, () => {
  let world: DashboardWorld;
  let pages: DashboardPages;

  beforeAll(async () => {
    if (chromiumPath === undefined) throw new Error(reason);
    world = await startDashboardWorld({
      register: (f) => {
        // A second reactor failing with one message for all, so grouping by error has a group of many.
        f.registerReadmodel(
          new Reactor(f, { name: "Pager", domain: "Todo", retry: { maxAttempts: 1 } }).on(TodoCreated, (e) => {
            if (e.payload.title.startsWith("undeliverable: ")) throw new Error("pager offline");
          }),
        );
        // A readmodel of a domain nobody writes to: it processes nothing.
        const Quiet = defineDomain("Quiet");
        const Hushed = Quiet.event<{ n: number }>("Hushed");
        const QuietAggregate = Quiet.aggregate("Quiet", { initialState: () => ({ n: 0 }), evolve: (on) => [on(Hushed, (_s, p) => p)] });
        f.registerDomain(Quiet);
        f.registerReadmodel(new ProjectionReadmodel(f, { aggregate: QuietAggregate, name: "QuietProjection" }));
      },
    });
    for (let i = 0; i < LETTERS; i++) await world.createUndeliverable(`letter ${i}`);
    await until(
      async () => (await world.facade.runtime.listDeadLetters({ limit: 1000 })).length === 2 * LETTERS,
      "90 dead letters",
      60_000,
    );
    pages = await dashboardPages(chromiumPath);
  }, 180_000);

  afterAll(async () => {
    await pages?.close();
    await world?.close();
  });

  const list = "[data-view=dead-letters]";
  const rows = (page: Page) => page.locator(`${list} tr[data-entry]`);
  const keys = (page: Page) => rows(page).evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-entry")!));

  /** No horizontal scroll of the page or the table, and every button on screen. */
  async function layout(page: Page) {
    return page.evaluate(() => {
      const width = document.documentElement.clientWidth;
      const buttons = Array.from(document.querySelectorAll("[data-view=dead-letters] button"), (b) => b.getBoundingClientRect());
      return {
        pageScroll: document.documentElement.scrollWidth - width,
        offScreen: buttons.filter((r) => r.left < 0 || r.right > width).length,
        height: document.documentElement.scrollHeight,
      };
    });
  }

  for (const width of [1400, 800]) {
    it(`pages 90 dead letters 20 at a time and groups them by handler and by error at ${width} px`, async () => {
      const page = await pages.newPage({ width, height: 900 });
      await pages.signIn(page, ADMIN, world.url, "#/dead-letters");
      const total = (await world.facade.runtime.listDeadLetters({ limit: 1000 })).length;
      const pager = page.locator(`${list} .pager`);
      await poll(() => rows(page).count()).toBe(20);
      expect(await pager.getAttribute("data-pages")).toBe(String(Math.ceil(total / 20)));
      const first = await keys(page);
      const { pageScroll, offScreen, height } = await layout(page);
      expect({ pageScroll, offScreen }).toEqual({ pageScroll: 0, offScreen: 0 });
      // 20 rows, not 90: the page stays a page (42 letters once made 10,279 px at 800 px).
      expect(height).toBeLessThan(width === 800 ? 7000 : 3500);
      await page.click(`${list} [data-page-step=next]`);
      await poll(() => pager.getAttribute("data-page")).toBe("2");
      const second = await keys(page);
      expect(second).toHaveLength(20);
      expect(second.filter((k) => first.includes(k))).toEqual([]);

      const groups = () =>
        page
          .locator(`${list} tr[data-group]`)
          .evaluateAll((trs) =>
            trs.map((tr) => [tr.getAttribute("data-group")!, tr.querySelector("[data-group-count]")!.textContent!] as const),
          );
      await page.selectOption(`${list} [data-group-by]`, "handler");
      await poll(async () => (await groups()).length).toBeGreaterThan(0);
      expect(await pager.getAttribute("data-page")).toBe("1");
      for (const [name, count] of await groups()) {
        expect(["Notifier", "Pager"]).toContain(name);
        expect(count).toBe(String(LETTERS));
      }
      await page.selectOption(`${list} [data-group-by]`, "error");
      await poll(async () => (await groups()).some(([name]) => name === "pager offline" || name.startsWith("no mailbox for"))).toBe(true);
      // Each Notifier letter has its own message; all of Pager's share one.
      for (const [name, count] of await groups()) expect(count).toBe(name === "pager offline" ? String(LETTERS) : "1");
      // The tenant by its name, with the id in the title.
      const tenant = rows(page).first().locator("td[data-label=Tenant] .tenant");
      expect(await tenant.innerText()).toBe("system");
      expect(await tenant.getAttribute("title")).toBe(world.systemTenantUuid);
    });
  }

  it("retries a page of dead letters in bulk at 800 px: one ControlDeadLetter each, every one attempted again", async () => {
    const runtime = world.facade.runtime;
    const page = await pages.newPage({ width: 800, height: 900 });
    await pages.signIn(page, ADMIN, world.url, "#/dead-letters");
    await poll(() => rows(page).count()).toBe(20);
    await page.click(`${list} [data-select-page]`);
    expect(await page.locator(`${list} [data-selected]`).getAttribute("data-selected")).toBe("20");
    const picked = await keys(page);
    const before = new Map((await runtime.listDeadLetters({ limit: 1000 })).map((e) => [e.id, e.lastAttemptAt ?? 0]));
    await page.click(`${list} [data-bulk-action=retry]`);
    await page.locator(`${list} [data-bulk-outcome=ok]`).waitFor();
    expect(await page.locator(`${list} [data-bulk-outcome]`).innerText()).toContain("20 of 20");
    // Each was made pending and failed its one attempt again: back among the dead letters, attempted later.
    await poll(async () => {
      const now = new Map((await runtime.listDeadLetters({ limit: 1000 })).map((e) => [e.id, e.lastAttemptAt ?? 0]));
      return picked.filter((id) => (now.get(id) ?? 0) > before.get(id)!).length;
    }).toBe(20);
    expect((await layout(page)).offScreen).toBe(0);
  });

  it("discards a whole group in bulk at 1400 px, across pages, after a confirmation", { timeout: 90_000 }, async () => {
    const runtime = world.facade.runtime;
    const page = await pages.newPage({ width: 1400, height: 900 });
    await pages.signIn(page, ADMIN, world.url, "#/dead-letters");
    await poll(() => rows(page).count()).toBe(20);
    await page.selectOption(`${list} [data-group-by]`, "handler");
    // Groups follow each other: Pager's begins on a later page.
    const group = page.locator(`${list} tr[data-group=Pager] [data-select-group]`);
    while ((await group.count()) === 0) {
      expect(await page.locator(`${list} [data-page-step=next]`).isEnabled()).toBe(true);
      await page.click(`${list} [data-page-step=next]`);
    }
    await group.first().click();
    expect(await page.locator(`${list} [data-selected]`).getAttribute("data-selected")).toBe(String(LETTERS));
    const discard = page.locator(`${list} [data-bulk-action=discard]`);
    await discard.click();
    expect(await discard.innerText()).toBe(`Confirm: discard (${LETTERS})`);
    expect((await runtime.listDeadLetters({ eventHandlerName: "Pager", limit: 1000 })).length).toBe(LETTERS); // not yet
    await discard.click();
    await page.locator(`${list} [data-bulk-outcome=ok]`).waitFor();
    expect(await page.locator(`${list} [data-bulk-outcome]`).innerText()).toBe(`Discarded: ${LETTERS} of ${LETTERS}`);
    expect((await runtime.listDeadLetters({ eventHandlerName: "Pager", limit: 1000 })).length).toBe(0);
    expect((await runtime.listDeadLetters({ eventHandlerName: "Notifier", limit: 1000 })).length).toBe(LETTERS);
    await poll(() => page.locator(`${list} .pager`).getAttribute("data-pages")).toBe(String(Math.ceil(LETTERS / 20)));
  });

  it("shows the instance by host and process, sends no Shards query in a plain app, and — for a handler that processed nothing", async () => {
    const page = await pages.newPage({ width: 1400, height: 900 });
    const asked: string[] = [];
    page.on("request", (r) => {
      if (r.url().includes("/Shards/")) asked.push(r.url());
    });
    await pages.signIn(page, ADMIN, world.url);
    const instance = page.locator(`[data-view=overview] [data-instance]`);
    await instance.waitFor();
    expect(await instance.innerText()).toBe(`${hostname()} · pid ${process.pid}`);
    expect(await instance.getAttribute("data-instance")).toBe(world.facade.runtime.systemInfo().instanceId);
    await page.waitForTimeout(2500); // at least one more poll of the overview
    expect(asked).toEqual([]);
    await page.click("[data-nav=handlers]");
    const quiet = page.locator("tr[data-handler=QuietProjection] td[data-label='Mean / p99']");
    await quiet.waitFor();
    expect(await quiet.innerText()).toBe("—");
    const busy = page.locator("tr[data-handler=TodoProjection] td[data-label='Mean / p99']");
    expect(await busy.innerText()).toMatch(/^\d+(\.\d)? (µs|ms) \/ \d+(\.\d)? (µs|ms)$/);
  });

  it("ran without a script error or a CSP violation", () => {
    expect(pages.problems).toEqual([]);
  });
});
