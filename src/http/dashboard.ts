import { MnemeError } from "../model/errors.js";

/**
 * The Runtime dashboard's static assets, served under `/dashboard/` when
 * `createHttpHandler(facade, { dashboard: true })` (docs/dashboard.md). The
 * assets are built by `npm run build` into `dist/dashboard/`; nothing is built
 * at run time and nothing comes from a CDN. The page talks to the same public
 * HTTP API as any other client, so it can do exactly what its user may.
 */

/** The answer to a dashboard request: the shape of the handler's replies (text bodies only). */
export interface DashboardReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
}

/** Reads one request header by lowercase name (a Fetch `Headers` fits). */
export interface DashboardHeaders {
  get(name: string): string | null;
}

/** What a request the dashboard answers looks like after the handler stripped its basePath. */
export interface DashboardRequest {
  /** Upper case. */
  readonly method: string;
  /** The path below basePath, still percent-encoded: `/dashboard/` or `/dashboard/<asset>`. */
  readonly path: string;
  readonly headers: DashboardHeaders;
}

/** One file of the built dashboard, held in memory. */
interface Asset {
  readonly body: string;
  readonly contentType: string;
  readonly etag: string;
  readonly cacheControl: string;
}

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

/**
 * Strict: scripts and styles only from the dashboard's own files (no inline
 * script or style attribute), requests only to the same origin (the API), no
 * framing, no plugins, no form posts elsewhere.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  "content-security-policy": DASHBOARD_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
});

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
export class Dashboard {
  private readonly assetsDir: URL;
  private readonly typeBase: string;
  private loading: Promise<ReadonlyMap<string, Asset>> | undefined;

  constructor(options: DashboardOptions = {}) {
    const dir = options.assetsDir ?? defaultAssetsDir();
    this.assetsDir = typeof dir === "string" ? directoryUrl(dir) : dir;
    this.typeBase = options.problemTypeBase ?? "urn:mneme:error:";
  }

  /** True when `path` (below basePath) belongs to the dashboard. */
  static owns(path: string): boolean {
    return path === DASHBOARD_PATH || path.startsWith(`${DASHBOARD_PATH}/`);
  }

  /** Answers one request whose path the dashboard owns; for HEAD the caller leaves out the body. */
  async serve(request: DashboardRequest): Promise<DashboardReply> {
    const { method, path } = request;
    if (method !== "GET" && method !== "HEAD") {
      const allow = "GET, HEAD, OPTIONS";
      if (method === "OPTIONS") return { status: 204, headers: { allow } };
      return this.problem(405, "INVALID_REQUEST", `${method} is not allowed on ${path.slice(0, 200)}; allowed: ${allow}`, { allow });
    }
    // Relative, so it stays right below any basePath.
    if (path === DASHBOARD_PATH) return { status: 308, headers: { location: "dashboard/", "cache-control": CACHE_CONTROL } };
    const name = path.slice(DASHBOARD_PATH.length + 1) || "index.html";
    if (!ASSET_NAME.test(name)) return this.notFound(path);
    let assets: ReadonlyMap<string, Asset>;
    try {
      assets = await this.assets();
    } catch (e) {
      // The message names no server path: anyone may ask for /dashboard/.
      const reason = e instanceof MnemeError ? e.message : "the dashboard's assets cannot be read";
      return this.problem(503, "UNAVAILABLE", reason);
    }
    const asset = assets.get(name);
    if (asset === undefined) return this.notFound(path);
    const headers = { ...SECURITY_HEADERS, "content-type": asset.contentType, "cache-control": asset.cacheControl, etag: asset.etag };
    if (etagMatches(request.headers.get("if-none-match"), asset.etag)) return { status: 304, headers };
    return { status: 200, headers, body: asset.body };
  }

  /** `serve` for a Fetch API request; `path` is below basePath. HEAD gets the headers of GET and no body. */
  async respond(request: Request, path: string): Promise<Response> {
    const method = request.method.toUpperCase();
    const reply = await this.serve({ method, path, headers: request.headers });
    return new Response(method === "HEAD" ? null : (reply.body ?? null), { status: reply.status, headers: reply.headers });
  }

  private assets(): Promise<ReadonlyMap<string, Asset>> {
    this.loading ??= loadAssets(this.assetsDir).catch((e: unknown) => {
      this.loading = undefined; // a build that appears later is picked up
      throw e;
    });
    return this.loading;
  }

  private notFound(path: string): DashboardReply {
    return this.problem(404, "NOT_FOUND", `no dashboard asset ${JSON.stringify(path.slice(0, 200))}`);
  }

  private problem(status: number, code: string, detail: string, headers: Record<string, string> = {}): DashboardReply {
    const title = status === 404 ? "Not Found" : status === 405 ? "Method Not Allowed" : "Service Unavailable";
    return {
      status,
      headers: { "content-type": "application/problem+json", "cache-control": "no-store", ...headers },
      body: JSON.stringify({ type: `${this.typeBase}${code}`, title, status, detail, code }),
    };
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

function directoryUrl(dir: string): URL {
  if (dir.startsWith("file:")) return new URL(dir.endsWith("/") ? dir : `${dir}/`);
  const absolute = dir.startsWith("/") ? dir : `${process.cwd()}/${dir}`;
  return new URL(`file://${encodeURI(absolute.endsWith("/") ? absolute : `${absolute}/`)}`);
}

async function loadAssets(dir: URL): Promise<ReadonlyMap<string, Asset>> {
  const fs = await import("node:fs/promises");
  let names: string[];
  try {
    names = (await fs.readdir(dir, { recursive: true })).map((n) => n.split("\\").join("/"));
  } catch (e) {
    throw new MnemeError("UNAVAILABLE", "the dashboard's assets are not built (no dist/dashboard/): run npm run build", { cause: e });
  }
  if (!names.includes("index.html"))
    throw new MnemeError("UNAVAILABLE", "the dashboard's assets are incomplete (no index.html in dist/dashboard/): run npm run build");
  const assets = new Map<string, Asset>();
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

/** A strong validator: a SHA-256 digest of the content (web crypto). */
export async function etagOf(body: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(body)));
  let hex = "";
  for (const b of digest.subarray(0, 16)) hex += b.toString(16).padStart(2, "0");
  return `"${hex}"`;
}

/** If-None-Match: `*` or a list of entity tags, weak ones compared weakly (RFC 9110, 13.1.2). */
export function etagMatches(header: string | null, etag: string): boolean {
  if (header === null) return false;
  if (header.trim() === "*") return true;
  return header.split(",").some((t) => t.trim().replace(/^W\//, "") === etag);
}
