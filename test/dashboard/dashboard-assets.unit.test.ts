/**
 * The dashboard's asset server on a folder of its own: only files read from
 * the assets folder are served, by exact name (no path traversal, whatever the
 * encoding), with their content type, an ETag, no-cache and the strict CSP;
 * a missing build is a 503 that heals once the files exist.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { DASHBOARD_CSP, Dashboard, type DashboardReply } from "../../src/http/dashboard.js";

const root = mkdtempSync(join(tmpdir(), "mneme-dashboard-"));
const assets = join(root, "assets");
const SECRET = "do-not-serve-this";
mkdirSync(join(assets, "js", "views"), { recursive: true });
writeFileSync(join(root, "secret.txt"), SECRET);
writeFileSync(join(root, "secret.js"), SECRET);
writeFileSync(join(assets, "index.html"), "<!doctype html><title>t</title>");
writeFileSync(join(assets, "dashboard.css"), "body{}");
writeFileSync(join(assets, "favicon.svg"), "<svg/>");
writeFileSync(join(assets, "js", "main.js"), "export {};");
writeFileSync(join(assets, "js", "views", "a.js"), "export const a = 1;");
writeFileSync(join(assets, "js", "main.js.map"), SECRET);
writeFileSync(join(assets, "js", "main.ts"), SECRET);
writeFileSync(join(assets, ".env"), SECRET);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const headers = (h: Record<string, string> = {}) => ({ get: (name: string) => h[name] ?? null });
const get = (d: Dashboard, path: string, h: Record<string, string> = {}): Promise<DashboardReply> =>
  d.serve({ method: "GET", path, headers: headers(h) });

describe("Dashboard (the asset server)", () => {
  const dashboard = new Dashboard({ assetsDir: assets });

  it("serves index.html at /dashboard/ with its type, an ETag, no-cache and the strict CSP", async () => {
    const r = await get(dashboard, "/dashboard/");
    expect(r.status).toBe(200);
    expect(r.body).toBe("<!doctype html><title>t</title>");
    expect(r.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(r.headers["cache-control"]).toBe("no-cache");
    expect(r.headers.etag).toMatch(/^"[0-9a-f]{32}"$/);
    expect(r.headers["content-security-policy"]).toBe(DASHBOARD_CSP);
    expect(DASHBOARD_CSP).toContain("script-src 'self'");
    expect(DASHBOARD_CSP).not.toContain("unsafe-inline");
    expect(r.headers["x-content-type-options"]).toBe("nosniff");
    expect(r.headers["x-frame-options"]).toBe("DENY");
  });

  it("answers each asset with its content type", async () => {
    const types: Record<string, string> = {
      "/dashboard/index.html": "text/html; charset=utf-8",
      "/dashboard/dashboard.css": "text/css; charset=utf-8",
      "/dashboard/favicon.svg": "image/svg+xml",
      "/dashboard/js/main.js": "text/javascript; charset=utf-8",
      "/dashboard/js/views/a.js": "text/javascript; charset=utf-8",
    };
    for (const [path, type] of Object.entries(types)) {
      const r = await get(dashboard, path);
      expect([path, r.status, r.headers["content-type"]]).toEqual([path, 200, type]);
    }
  });

  it("answers a matching If-None-Match with 304 and no body; another ETag gets the file", async () => {
    const first = await get(dashboard, "/dashboard/js/main.js");
    const etag = first.headers.etag!;
    for (const inm of [etag, `W/${etag}`, `"x", ${etag}`, "*"]) {
      const r = await get(dashboard, "/dashboard/js/main.js", { "if-none-match": inm });
      expect([inm, r.status, r.body]).toEqual([inm, 304, undefined]);
      expect(r.headers.etag).toBe(etag);
    }
    const other = await get(dashboard, "/dashboard/js/main.js", { "if-none-match": '"0000"' });
    expect(other.status).toBe(200);
    // Different content, different validator.
    expect((await get(dashboard, "/dashboard/js/views/a.js")).headers.etag).not.toBe(etag);
  });

  it("redirects /dashboard to dashboard/ (relative, so it holds below any basePath)", async () => {
    const r = await get(dashboard, "/dashboard");
    expect(r.status).toBe(308);
    expect(r.headers.location).toBe("dashboard/");
  });

  it("GET and HEAD only: OPTIONS lists them, anything else is 405 with Allow", async () => {
    const options = await dashboard.serve({ method: "OPTIONS", path: "/dashboard/", headers: headers() });
    expect(options.status).toBe(204);
    expect(options.headers.allow).toBe("GET, HEAD, OPTIONS");
    for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
      const r = await dashboard.serve({ method, path: "/dashboard/index.html", headers: headers() });
      expect(r.status).toBe(405);
      expect(r.headers.allow).toBe("GET, HEAD, OPTIONS");
      expect(JSON.parse(r.body!)).toMatchObject({ status: 405, code: "INVALID_REQUEST" });
    }
  });

  it("never serves a file outside the assets folder, a dotfile, a source map or a file of another type", async () => {
    const attempts = [
      "/dashboard/../secret.txt",
      "/dashboard/js/../../secret.js",
      "/dashboard/%2e%2e/secret.txt",
      "/dashboard/%2E%2E%2Fsecret.txt",
      "/dashboard/..%2fsecret.txt",
      "/dashboard/js/..%2f..%2fsecret.js",
      "/dashboard/..\\secret.txt",
      "/dashboard/js\\..\\..\\secret.js",
      "/dashboard//secret.txt",
      "/dashboard/./index.html",
      "/dashboard/%00",
      "/dashboard/index.html%00.js",
      `/dashboard/${encodeURIComponent(join(root, "secret.txt"))}`,
      "/dashboard/.env",
      "/dashboard/js/main.js.map",
      "/dashboard/js/main.ts",
      "/dashboard/js/",
      "/dashboard/js",
      "/dashboard/nothing.js",
    ];
    for (const path of attempts) {
      const r = await get(dashboard, path);
      expect([path, r.status]).toEqual([path, 404]);
      expect(r.body).not.toContain(SECRET);
      expect(JSON.parse(r.body!)).toMatchObject({ code: "NOT_FOUND", status: 404 });
    }
  });

  it("whatever the path, the answer is 404 or one of the assets, byte for byte (property)", async () => {
    const served = new Map<string, string>();
    for (const name of ["index.html", "dashboard.css", "favicon.svg", "js/main.js", "js/views/a.js"]) {
      served.set(name, (await get(dashboard, `/dashboard/${name}`)).body!);
    }
    const segment = fc.oneof(
      fc.constantFrom("..", ".", "%2e%2e", "%2E", "%2f", "%5c", "\\", "", "js", "views", "main.js", "secret.txt", ".env", "%00"),
      fc.string({ maxLength: 8 }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(segment, { maxLength: 6 }), async (segments) => {
        const path = `/dashboard/${segments.join("/")}`;
        const r = await get(dashboard, path);
        if (r.status === 404) {
          expect(r.body).not.toContain(SECRET);
        } else {
          expect(r.status).toBe(200);
          expect([...served.values()]).toContain(r.body);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("without a build: 503 UNAVAILABLE naming npm run build; the files are picked up once they exist", async () => {
    const later = join(root, "later");
    const d = new Dashboard({ assetsDir: pathToFileURL(`${later}/`) });
    const missing = await get(d, "/dashboard/");
    expect(missing.status).toBe(503);
    expect(JSON.parse(missing.body!)).toMatchObject({ code: "UNAVAILABLE", status: 503 });
    expect(missing.body).toContain("npm run build");
    // No server path in an answer anyone can ask for.
    expect(missing.body).not.toContain(root);
    mkdirSync(later);
    writeFileSync(join(later, "dashboard.css"), "x{}");
    const incomplete = await get(d, "/dashboard/dashboard.css");
    expect(incomplete.status).toBe(503);
    expect(incomplete.body).toContain("no index.html");
    writeFileSync(join(later, "index.html"), "<p>ok</p>");
    const built = await get(d, "/dashboard/");
    expect([built.status, built.body]).toEqual([200, "<p>ok</p>"]);
  });

  it("owns /dashboard and what is below it, nothing else", () => {
    expect(Dashboard.owns("/dashboard")).toBe(true);
    expect(Dashboard.owns("/dashboard/")).toBe(true);
    expect(Dashboard.owns("/dashboard/js/main.js")).toBe(true);
    expect(Dashboard.owns("/dashboards")).toBe(false);
    expect(Dashboard.owns("/api/dashboard/")).toBe(false);
    expect(Dashboard.owns("/")).toBe(false);
  });
});
