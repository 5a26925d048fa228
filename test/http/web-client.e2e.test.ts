/**
 * examples/web-client in a real browser: the example's server (a child
 * process, as `npx tsx examples/web-client/server.ts` runs it) on a temp
 * SQLite file seeded by `mneme seed`; headless Chromium opens its page, signs
 * in, opens and closes a ticket through the generated client, and sees the
 * live query's list and the event feed follow the commands the test sends
 * through the same client from Node; another tenant's tickets never show; a
 * reload resumes the feed after the last event the tab saw, with nothing twice
 * and nothing missed. Also: the committed client.ts is what `mneme client`
 * writes for the app today.
 *
 * Without Chromium the browser part is skipped with the reason, unless CI is
 * set: on CI a missing browser fails the run.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newUuid } from "mneme";
import { createClient } from "../../examples/web-client/client.js";
import { browserGate, launchChromium, onCi } from "../support/chromium.js";
import { runProcess } from "../support/run-process.js";

const root = join(import.meta.dirname, "..", "..");
const dir = join(root, "examples", "web-client");
const { chromiumPath, skip: skipBrowser, reason: NO_BROWSER } = browserGate("test/http/web-client.e2e.test.ts");
const tmp = mkdtempSync(join(tmpdir(), "mneme-web-client-"));
const ANN = { email: "ann@acme.example", password: "ann's first password" };
const GUS = { email: "gus@globex.example", password: "gus's first password" };

/** Waits for the page to reach a state, up to a deadline (a loaded machine is slow; nothing sleeps a fixed time). */
const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 15_000, interval: 50 });

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

it("the committed client.ts is what `mneme client` writes for the app today", async () => {
  const out = join(tmp, "client.ts");
  const run = await runProcess("npx", ["tsx", "src/cli/main.ts", "client", "--app", join(dir, "app.ts"), "--out", out], root, 90_000, {
    ...process.env,
    BOARD_DB: join(tmp, "generate.db"),
  });
  expect(run.stderr).toBe("");
  expect(run.code).toBe(0);
  // When this fails, the app's messages changed: regenerate client.ts as examples/web-client/README.md says, and commit it.
  expect(readFileSync(out, "utf8")).toBe(readFileSync(join(dir, "client.ts"), "utf8"));
}, 120_000);

// On CI a missing browser is a failed test, not only a failed hook.
it.runIf(onCi())("finds Chromium on CI", () => {
  expect(chromiumPath, NO_BROWSER).toBeDefined();
});

describe.skipIf(skipBrowser)(`the web-client example in Chromium${skipBrowser ? ` (skipped: ${NO_BROWSER})` : ""}`, () => {
  let server: ChildProcess | undefined;
  let url: string;
  let browser: Browser | undefined;
  const problems: string[] = [];

  beforeAll(async () => {
    if (chromiumPath === undefined) throw new Error(NO_BROWSER);
    const env: NodeJS.ProcessEnv = { ...process.env, BOARD_DB: join(tmp, "board.db"), PORT: "0", HOST: "127.0.0.1" };
    const seed = await runProcess(
      "npx",
      ["tsx", "src/cli/main.ts", "seed", "--app", join(dir, "app.ts"), "--file", join(dir, "seed.json")],
      root,
      120_000,
      env,
    );
    expect(seed.code, seed.stderr).toBe(0);
    expect(JSON.parse(seed.stdout)).toMatchObject({ changed: true });
    [{ url, proc: server }, browser] = await Promise.all([start(env), launchChromium(chromiumPath)]);
  }, 180_000);

  afterAll(async () => {
    if (server !== undefined && server.exitCode === null) {
      const exited = new Promise<number | null>((resolve) => server!.once("exit", resolve));
      server.kill("SIGTERM");
      // The server stops cleanly on SIGTERM, with event streams still open in the pages.
      expect(await exited).toBe(0);
    }
    await browser?.close();
  });

  /** A fresh browser profile (its own cookies and sessionStorage) whose errors and CSP violations are collected. */
  async function newPage(): Promise<Page> {
    const context = await browser!.newContext();
    const page = await context.newPage();
    page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
    await page.addInitScript(() =>
      document.addEventListener("securitypolicyviolation", (e) => console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`)),
    );
    page.on("console", (m) => {
      if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) problems.push(`console: ${m.text()}`);
    });
    return page;
  }

  /** Signs in from Node: the generated client with the session's token, as another program of the tenant would. */
  async function clientOf(who: { email: string; password: string }) {
    const r = await fetch(`${url}/api/sessions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(who),
    });
    expect(r.status).toBe(201);
    const session = (await r.json()) as { token: string; identities: { identityUuid: string; tenantUuid: string }[] };
    const { identityUuid, tenantUuid } = session.identities[0]!;
    return { tenantUuid, client: createClient({ baseUrl: url, tenantUuid, identityUuid, token: session.token }) };
  }

  const tickets = (page: Page) => page.locator("#tickets li").evaluateAll((lis) => lis.map((li) => li.firstChild?.textContent ?? ""));
  const feed = (page: Page) =>
    page
      .locator("#feed li")
      .evaluateAll((lis) => lis.map((li) => ({ position: Number(li.getAttribute("data-position")), text: li.textContent })));

  it("signs in, follows the live list and the event feed, never shows another tenant's, and resumes the feed on reload", async () => {
    const page = await newPage();
    await page.goto(url);
    await page.fill("input[name=email]", ANN.email);
    await page.fill("input[name=password]", ANN.password);
    await page.click("#sign-in button[type=submit]");
    await poll(() => page.locator("#tickets-state").innerText()).toBe("live");
    await poll(() => page.locator("#feed-state").innerText()).toBe("live");
    expect(await tickets(page)).toEqual([]);

    // The page's own commands, through the generated client with the session cookie.
    await page.fill("input[name=title]", "printer on fire");
    await page.click("#open-ticket button[type=submit]");
    await poll(() => tickets(page)).toEqual(["printer on fire"]);
    await page.click("#tickets li button");
    await poll(() => tickets(page)).toEqual([]);

    // Commands sent from elsewhere: the list and the feed follow them.
    const ann = await clientOf(ANN);
    const gus = await clientOf(GUS);
    expect(gus.tenantUuid).not.toBe(ann.tenantUuid);
    const open = async (who: typeof ann, title: string) => {
      const ticketUuid = newUuid();
      const r = await who.client.commands.Board.OpenTicket({ ticketUuid, title });
      expect(r, JSON.stringify(r)).toMatchObject({ ok: true });
      return ticketUuid;
    };
    const printer = await open(ann, "printer out of toner");
    await open(gus, "Globex: the secret merger");
    const reset = await open(ann, "password reset");
    await poll(() => tickets(page)).toEqual(["printer out of toner", "password reset"]);
    expect((await ann.client.commands.Board.CloseTicket({ ticketUuid: printer })).ok).toBe(true);
    await poll(() => tickets(page)).toEqual(["password reset"]);
    // The live query's answer over HTTP is the same the page shows.
    const listed = await ann.client.queries.Board.ListOpenTickets();
    expect(listed.ok && listed.value.tickets.map((t) => t.ticketUuid)).toEqual([reset]);

    const expected = [
      /TicketOpened printer on fire$/,
      /TicketClosed /,
      /TicketOpened printer out of toner$/,
      /TicketOpened password reset$/,
      new RegExp(`TicketClosed ${printer.slice(-12)}$`),
    ];
    await poll(async () => (await feed(page)).length).toBe(expected.length);
    const before = await feed(page);
    before.forEach((item, i) => expect(item.text).toMatch(expected[i]!));
    // Positions of the store, increasing; Globex's event (between two of Ann's) is not among them.
    expect(before.map((i) => i.position)).toEqual([...before.map((i) => i.position)].sort((a, b) => a - b));
    expect(new Set(before.map((i) => i.position)).size).toBe(before.length);
    expect(await page.locator("body").innerText()).not.toContain("Globex");

    // Reload: the feed comes back from the tab's storage and resumes after its last position; an event sent
    // while the page reloads and one after it is live each appear exactly once, another tenant's never.
    await page.reload();
    const duringReload = await open(ann, "sent during the reload");
    await poll(() => page.locator("#feed-state").innerText()).toBe("live");
    await open(gus, "Globex: after the reload");
    const afterReload = await open(ann, "sent after the reload");
    await poll(() => tickets(page)).toEqual(["password reset", "sent during the reload", "sent after the reload"]);
    await poll(async () => (await feed(page)).length).toBe(expected.length + 2);
    const after = await feed(page);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.slice(before.length).map((i) => i.text)).toEqual([
      expect.stringMatching(/TicketOpened sent during the reload$/),
      expect.stringMatching(/TicketOpened sent after the reload$/),
    ]);
    expect(new Set(after.map((i) => i.position)).size).toBe(after.length);
    expect(await page.locator(`#feed li[data-ticket="${duringReload}"]`).count()).toBe(1);
    expect(await page.locator(`#feed li[data-ticket="${afterReload}"]`).count()).toBe(1);
    expect(await page.locator("body").innerText()).not.toContain("Globex");

    // Gus's page shows Globex's tickets only.
    const other = await newPage();
    await other.goto(url);
    await other.fill("input[name=email]", GUS.email);
    await other.fill("input[name=password]", GUS.password);
    await other.click("#sign-in button[type=submit]");
    await poll(() => tickets(other)).toEqual(["Globex: the secret merger", "Globex: after the reload"]);
    await poll(async () => (await feed(other)).length).toBe(2);

    // Signing out ends the session: the page asks to sign in again, and the cookie no longer opens a stream.
    await page.click("#sign-out");
    await poll(() => page.locator("#sign-in").isVisible()).toBe(true);
    await page.reload();
    await poll(() => page.locator("#sign-in").isVisible()).toBe(true);
    expect(problems).toEqual([]);
  }, 120_000);

  it("refuses a wrong password with the server's answer", async () => {
    const page = await newPage();
    await page.goto(url);
    await page.fill("input[name=email]", ANN.email);
    await page.fill("input[name=password]", "not the password");
    await page.click("#sign-in button[type=submit]");
    await poll(() => page.locator("#sign-in-problem").innerText()).not.toBe("");
    expect(await page.locator("#board").isVisible()).toBe(false);
  });
});

/** Starts the example's server as `npx tsx examples/web-client/server.ts` does; resolves with its URL once it listens. */
function start(env: NodeJS.ProcessEnv): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(process.execPath, ["--import", "tsx", join(dir, "server.ts")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start:\n${out}`)), 60_000);
    proc.stdout!.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve({ url: m[1]!, proc });
      }
    });
    proc.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    proc.once("exit", (code) => reject(new Error(`the server exited with ${code}:\n${out}`)));
  });
}
