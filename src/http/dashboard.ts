import { MnemeError } from "../model/errors.js";
import { directoryUrl, etagOf, type StaticAsset, StaticFiles } from "./static-files.js";

/**
 * The Runtime dashboard's static assets, served under `/dashboard/` when
 * `createHttpHandler(facade, { dashboard: true })` (docs/dashboard.md). The
 * assets are built by `npm run build` into `dist/dashboard/`; nothing is built
 * at run time and nothing comes from a CDN. The page talks to the same public
 * HTTP API as any other client, so it can do exactly what its user may.
 */

export { DASHBOARD_CSP, type DashboardHeaders, type DashboardReply, type DashboardRequest, etagMatches, etagOf } from "./static-files.js";

/** Where the assets are and how problems are typed; createHttpHandler passes its problemTypeBase. */
export interface DashboardOptions {
  /**
   * Folder of the built assets (index.html, dashboard.css, js/). Default: the
   * `dashboard/` folder next to mneme's compiled `http/` folder, i.e.
   * `dist/dashboard/` of the installed package.
   */
  readonly assetsDir?: URL | string;
  /** Prefix of a problem's `type` URI. Default "urn:mneme:error:". */
  readonly problemTypeBase?: string;
}

/** The path prefix the dashboard is served under (below basePath). */
export const DASHBOARD_PATH = "/dashboard";

/** Served file types; a file of another type in the assets folder is not served. */
const CONTENT_TYPES: Readonly<Record<string, string>> = Object.freeze({
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".json": "application/json; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
});

/**
 * Asset names are plain: letters, digits, `.`, `_`, `-`, one `/` between
 * segments, no segment starting with a dot. Anything else (`..`, `%2e`, `\`,
 * `//`, a NUL) is not a name of an asset and gets 404 before any lookup; the
 * lookup itself is in a table of the files read at load, never on the disk.
 */
const ASSET_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]*(?:\/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$/;

/** Every asset is revalidated (ETag, 304): names carry no content hash, so an upgrade is never served stale. */
const CACHE_CONTROL = "no-cache";

/**
 * Serves the built dashboard from memory. The files are read once, on the first
 * request, through `node:fs` loaded only then (so `mneme/http` without the
 * dashboard needs no file system); a missing build answers 503 and is looked
 * for again on the next request.
 */
export class Dashboard extends StaticFiles {
  private readonly assetsDir: URL;

  constructor(options: DashboardOptions = {}) {
    super({
      path: DASHBOARD_PATH,
      redirect: "dashboard/",
      missing: "dashboard asset",
      unreadable: "the dashboard's assets cannot be read",
      problemTypeBase: options.problemTypeBase ?? "urn:mneme:error:",
    });
    this.assetsDir = directoryUrl(options.assetsDir ?? defaultAssetsDir());
  }

  /** True when `path` (below basePath) belongs to the dashboard. */
  static owns(path: string): boolean {
    return path === DASHBOARD_PATH || path.startsWith(`${DASHBOARD_PATH}/`);
  }

  protected override acceptsName(name: string): boolean {
    return ASSET_NAME.test(name);
  }

  protected override load(): Promise<ReadonlyMap<string, StaticAsset>> {
    return loadAssets(this.assetsDir);
  }
}

/**
 * Where the built assets are: `dist/dashboard/` next to `dist/http/` in the
 * package; when mneme runs from its TypeScript sources (its own tests), the
 * repository's `dist/dashboard/` that `npm run build` wrote.
 */
function defaultAssetsDir(): URL {
  const fromSources = import.meta.url.endsWith(".ts");
  return new URL(fromSources ? "../../dist/dashboard/" : "../dashboard/", import.meta.url);
}

async function loadAssets(dir: URL): Promise<ReadonlyMap<string, StaticAsset>> {
  const fs = await import("node:fs/promises");
  let names: string[];
  try {
    names = (await fs.readdir(dir, { recursive: true })).map((n) => n.split("\\").join("/"));
  } catch (e) {
    throw new MnemeError("UNAVAILABLE", "the dashboard's assets are not built (no dist/dashboard/): run npm run build", { cause: e });
  }
  if (!names.includes("index.html"))
    throw new MnemeError("UNAVAILABLE", "the dashboard's assets are incomplete (no index.html in dist/dashboard/): run npm run build");
  const assets = new Map<string, StaticAsset>();
  for (const name of names) {
    const contentType = CONTENT_TYPES[extensionOf(name)];
    if (contentType === undefined || !ASSET_NAME.test(name)) continue;
    const body = await fs.readFile(new URL(name, dir), "utf8");
    assets.set(name, { body, contentType, etag: await etagOf(body), cacheControl: CACHE_CONTROL });
  }
  return assets;
}

function extensionOf(name: string): string {
  const dot = name.lastIndexOf(".");
  return dot === -1 ? "" : name.slice(dot);
}
