/**
 * Browser pages of the dashboard's e2e tests: a fresh Chromium profile per
 * page whose script errors and CSP violations are collected, and the sign-in
 * through the page's own form.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { launchChromium } from "./chromium.js";

export interface DashboardPages {
  /** A fresh profile (its own sessionStorage) at this viewport. */
  newPage(viewport?: { width: number; height: number }): Promise<Page>;
  /** Signs in through the form at `${url}/dashboard/${hash}` and waits for the shell. */
  signIn(page: Page, who: { email: string; password: string }, url: string, hash?: string): Promise<void>;
  /** Script errors and CSP violations seen on any page. */
  readonly problems: string[];
  close(): Promise<void>;
}

export async function dashboardPages(chromiumPath: string): Promise<DashboardPages> {
  const browser: Browser = await launchChromium(chromiumPath);
  const contexts: BrowserContext[] = [];
  const problems: string[] = [];
  return {
    problems,
    async newPage(viewport = { width: 1440, height: 900 }) {
      const context = await browser.newContext({ viewport });
      contexts.push(context);
      const page = await context.newPage();
      page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
      await page.addInitScript(() => {
        document.addEventListener("securitypolicyviolation", (e) => console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`));
      });
      page.on("console", (m) => {
        // "Failed to load resource": a refused request (401/403).
        if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) problems.push(`console: ${m.text()}`);
      });
      return page;
    },
    async signIn(page, who, url, hash = "") {
      await page.goto(`${url}/dashboard/${hash}`);
      await page.fill("input[name=email]", who.email);
      await page.fill("input[name=password]", who.password);
      await page.click("button[type=submit]");
      await page.waitForSelector(".shell");
    },
    async close() {
      for (const c of contexts) await c.close();
      await browser.close();
    },
  };
}
