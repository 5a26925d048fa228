/**
 * The API viewer (`createHttpHandler(f, { apiViewer: true })`): Swagger UI
 * from the optional package swagger-ui-dist at `<basePath>/api/docs/`, over
 * the handler's own OpenAPI document. Over the wire: the redirect, types,
 * ETag, the CSP, 404 / 405, off by default, and a clear 503 problem when the
 * package is missing. In headless Chromium: the page renders the Todo
 * example's operations, every request it makes goes to the same origin and
 * succeeds, no console error, no CSP violation (under the dashboard's strict
 * policy), on both HTTP paths and below a basePath.
 *
 * Without Chromium the browser part is skipped with the reason, unless CI is set.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFacade, type Facade } from "mneme";
import { createHttpHandler, toNodeListener } from "mneme/http";
import { registerTodo } from "../../examples/todo/todo-domain.js";
import { ApiViewer, locateSwaggerUi } from "../../src/http/api-viewer.js";
import { DASHBOARD_CSP } from "../../src/http/dashboard.js";
import { browserGate } from "../support/chromium.js";
import { type DashboardPages, dashboardPages } from "../support/dashboard-pages.js";
import { HTTP_PATHS, listenLocal, nodeListenerFor, testResolver } from "../support/http-fixture.js";
import { createServer } from "node:http";

const { chromiumPath, skip: skipBrowser } = browserGate("test/http/api-viewer.e2e.test.ts");
const swaggerDir = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));

let facade: Facade;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  facade = createFacade({ appName: "todo" });
  registerTodo(facade);
  await facade.start();
});
afterAll(async () => {
  for (const c of closers.splice(0).reverse()) await c().catch(() => undefined);
  await facade.stop();
});

async function serveWith(options: Parameters<typeof createHttpHandler>[1], path: (typeof HTTP_PATHS)[number] = "direct") {
  const handler = createHttpHandler(facade, { resolveCredentials: testResolver, ...options });
  const listener = path === "direct" ? toNodeListener(handler) : nodeListenerFor(handler, path);
  const srv = await listenLocal(createServer((req, res) => void listener(req, res)));
  closers.push(srv.close);
  return srv.url;
}

describe("serving the API viewer over HTTP", () => {
  it.each(HTTP_PATHS)("%s path: redirect, page, Swagger UI's files byte for byte, ETag, CSP, 404 and 405", async (path) => {
    const url = await serveWith({ apiViewer: true }, path);
    const bare = await fetch(`${url}/api/docs`, { redirect: "manual" });
    expect(bare.status).toBe(308);
    expect(bare.headers.get("location")).toBe("docs/");

    const page = await fetch(`${url}/api/docs/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    // The dashboard's strict policy, unchanged (no inline script or style, same-origin requests only).
    const csp = page.headers.get("content-security-policy")!;
    expect(csp).toBe(DASHBOARD_CSP);
    expect(csp).toContain("style-src 'self';");
    expect(csp).toContain("connect-src 'self'");
    const html = await page.text();
    // Nothing from another origin, no inline script.
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).not.toMatch(/<script>(?!<\/script>)/);

    for (const [name, type] of [
      ["swagger-ui-bundle.js", "text/javascript; charset=utf-8"],
      ["swagger-ui.css", "text/css; charset=utf-8"],
    ] as const) {
      const res = await fetch(`${url}/api/docs/${name}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe(type);
      expect(await res.text()).toBe(readFileSync(join(swaggerDir, name), "utf8"));
      const again = await fetch(`${url}/api/docs/${name}`, { headers: { "if-none-match": res.headers.get("etag")! } });
      expect(again.status).toBe(304);
    }
    const init = await (await fetch(`${url}/api/docs/viewer.js`)).text();
    expect(init).toContain("validatorUrl: null");

    const missing = await fetch(`${url}/api/docs/../openapi.json.map`);
    expect([404, 200]).toContain(missing.status); // fetch normalises `..`: the document itself may answer
    const unknown = await fetch(`${url}/api/docs/swagger-ui-bundle.js.map`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: "NOT_FOUND" });
    const post = await fetch(`${url}/api/docs/`, { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
    const head = await fetch(`${url}/api/docs/swagger-ui.css`, { method: "HEAD" });
    expect(head.status).toBe(200);
  });

  it("is off by default; a bad option is refused; a missing package answers 503 saying to install it", async () => {
    const off = await serveWith({});
    expect((await fetch(`${off}/api/docs/`)).status).toBe(404);
    expect(() => createHttpHandler(facade, { apiViewer: "yes" as never })).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
    expect(() => createHttpHandler(facade, { apiViewer: { dir: "x" } as never })).toThrow(
      expect.objectContaining({ code: "INVALID_REQUEST" }),
    );

    // Not installed: the resolver finds no package.
    const notFound = async () => {
      throw Object.assign(new Error("Cannot find module 'swagger-ui-dist/package.json'"), { code: "MODULE_NOT_FOUND" });
    };
    await expect(locateSwaggerUi(notFound)).rejects.toMatchObject({
      code: "UNAVAILABLE",
      message: expect.stringContaining("npm install swagger-ui-dist"),
    });
    const viewer = new ApiViewer({ resolve: notFound });
    const reply = await viewer.serve({ method: "GET", path: "/api/docs/", headers: new Headers() });
    expect(reply.status).toBe(503);
    expect(reply.headers["content-type"]).toBe("application/problem+json");
    expect(JSON.parse(reply.body!)).toMatchObject({ status: 503, code: "UNAVAILABLE", detail: expect.stringContaining("swagger-ui-dist") });
    // The installed package is found by default.
    expect((await locateSwaggerUi()).pathname).toBe(`${swaggerDir}/`);

    // A folder without Swagger UI's files, over HTTP.
    const empty = await serveWith({ apiViewer: { swaggerUiDir: join(import.meta.dirname, "support") } });
    const res = await fetch(`${empty}/api/docs/`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ code: "UNAVAILABLE", detail: expect.stringContaining("swagger-ui-bundle.js") });
  });
});

describe.skipIf(skipBrowser)("the API viewer in Chromium", () => {
  let pages: DashboardPages;
  beforeAll(async () => {
    pages = await dashboardPages(chromiumPath!);
  });
  afterAll(async () => {
    await pages?.close();
  });

  it.each([
    { path: "direct", basePath: "" },
    { path: "fetch", basePath: "" },
    { path: "direct", basePath: "/mneme" },
  ] as const)(
    "$path path, basePath '$basePath': renders the Todo example's operations, loads only its own origin, no error",
    { timeout: 60_000 },
    async ({ path, basePath }) => {
      const url = await serveWith({ apiViewer: true, basePath }, path);
      const page = await pages.newPage();
      const requests: string[] = [];
      const failures: string[] = [];
      page.on("request", (r) => requests.push(r.url()));
      page.on("requestfailed", (r) => failures.push(`${r.url()}: ${r.failure()?.errorText}`));
      page.on("response", (r) => {
        if (r.status() >= 400) failures.push(`${r.url()}: ${r.status()}`);
      });
      await page.goto(`${url}${basePath}/api/docs`);
      await page.locator(".opblock", { hasText: "CreateTodo" }).first().waitFor({ timeout: 30_000 });
      expect(await page.locator(".opblock", { hasText: "CompleteTodo" }).count()).toBeGreaterThan(0);
      expect(await page.locator(".info .title").innerText()).toContain("todo");
      // Expand one operation: its request body schema renders too.
      await page.locator(".opblock", { hasText: "CreateTodo" }).first().locator(".opblock-summary").click();
      await page.locator(".opblock.is-open .opblock-body").first().waitFor();
      expect(failures).toEqual([]);
      expect(requests.every((r) => r.startsWith(`${url}/`) || r.startsWith("data:"))).toBe(true);
      expect(requests).toContain(`${url}${basePath}/api/openapi.json`);
      expect(pages.problems).toEqual([]);
      await page.close();
    },
  );
});
