/**
 * The dashboard in the published package: `npm pack` of a build (tsc plus
 * scripts/build-dashboard.mjs, what `npm run build` runs) carries the assets
 * under dist/dashboard/, no source map, and the compiled handler finds them
 * next to itself: createHttpHandler(f, { dashboard: true }) of the built
 * package serves /dashboard/.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runProcess } from "../support/run-process.js";

const root = join(import.meta.dirname, "..", "..");
const tmp = mkdtempSync(join(tmpdir(), "mneme-dashboard-pkg-"));
const pkgDir = join(tmp, "pkg");
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

interface PackedFile {
  path: string;
  size: number;
}

describe("the packed package carries the dashboard", () => {
  let files: PackedFile[];

  beforeAll(async () => {
    mkdirSync(pkgDir, { recursive: true });
    const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
    const build = await runProcess(process.execPath, [tsc, "-p", "tsconfig.build.json", "--outDir", join(pkgDir, "dist")], root, 240_000);
    expect(build.stdout + build.stderr, "build").toBe("");
    const assets = await runProcess(
      process.execPath,
      [join(root, "scripts", "build-dashboard.mjs"), "--out", join(pkgDir, "dist", "dashboard")],
      root,
    );
    expect(assets.code, assets.stderr).toBe(0);
    for (const f of ["package.json", "README.md", "CHANGELOG.md"]) cpSync(join(root, f), join(pkgDir, f));
    const pack = await runProcess("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], pkgDir);
    expect(pack.code, pack.stderr).toBe(0);
    files = (JSON.parse(pack.stdout) as { files: PackedFile[] }[])[0]!.files;
  }, 300_000);

  it("holds index.html, the stylesheet, the icon and every module, and no source map", () => {
    const paths = files.map((f) => f.path);
    for (const p of [
      "dist/http/dashboard.js",
      "dist/dashboard/index.html",
      "dist/dashboard/dashboard.css",
      "dist/dashboard/favicon.svg",
      "dist/dashboard/js/main.js",
      "dist/dashboard/js/sse.js",
      "dist/dashboard/js/chart.js",
      "dist/dashboard/js/views/handlers.js",
      "dist/dashboard/js/views/stores.js",
    ]) {
      expect(paths).toContain(p);
    }
    expect(paths.filter((p) => p.endsWith(".map"))).toEqual([]);
    const dashboardBytes = files.filter((f) => f.path.startsWith("dist/dashboard/")).reduce((n, f) => n + f.size, 0);
    // Small and dependency-light: the whole dashboard stays under 150 KB unpacked.
    expect(dashboardBytes).toBeLessThan(150 * 1024);
  });

  it("the built handler serves the packed assets from dist/dashboard/", async () => {
    // The package's dependencies, as an installed package would find them.
    symlinkSync(join(root, "node_modules"), join(pkgDir, "node_modules"), "dir");
    const mneme = (await import(pathToFileURL(join(pkgDir, "dist", "index.js")).href)) as typeof import("mneme");
    const http = (await import(pathToFileURL(join(pkgDir, "dist", "http", "index.js")).href)) as typeof import("mneme/http");
    const facade = mneme.createFacade({ appName: "packed" });
    const handler = http.createHttpHandler(facade, { dashboard: true, resolveCredentials: async () => undefined });
    const index = await handler(new Request("http://127.0.0.1/dashboard/"));
    expect(index.status).toBe(200);
    expect(await index.text()).toContain('<script type="module" src="js/main.js"></script>');
    const main = await handler(new Request("http://127.0.0.1/dashboard/js/main.js"));
    expect(main.status).toBe(200);
    expect(main.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
  });
});
