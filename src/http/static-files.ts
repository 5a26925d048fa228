import { MnemeError } from "../model/errors.js";

/**
 * Static files served from memory under one path of the handler: the
 * dashboard's built assets (dashboard.ts) and the API viewer (api-viewer.ts).
 * Both answer GET and HEAD only, redirect their bare path to its folder, send
 * every file with the same security headers and an ETag (304 on a match), and
 * read their files once, on the first request (a failed read is tried again
 * by the next one).
 */

/** The answer to a static file request: the shape of the handler's replies (text bodies only). */
export interface DashboardReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
}

/** Reads one request header by lowercase name (a Fetch `Headers` fits). */
export interface DashboardHeaders {
  get(name: string): string | null;
}

/** What a request for a static file looks like after the handler stripped its basePath. */
export interface DashboardRequest {
  /** Upper case. */
  readonly method: string;
  /** The path below basePath, still percent-encoded: `/dashboard/` or `/dashboard/<asset>`. */
  readonly path: string;
  readonly headers: DashboardHeaders;
}

/** One file, held in memory. */
export interface StaticAsset {
  readonly body: string;
  readonly contentType: string;
  readonly etag: string;
  readonly cacheControl: string;
}

/**
 * Strict: scripts and styles only from the served files (no inline script or
 * style attribute), requests only to the same origin (the API), no framing,
 * no plugins, no form posts elsewhere.
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

/** Where a set of static files is served and how it speaks of itself in problems. */
export interface StaticFilesPlace {
  /** The path prefix below basePath, e.g. `/dashboard`. */
  readonly path: string;
  /** Where the bare path redirects, relative (so it stays right below any basePath), e.g. `dashboard/`. */
  readonly redirect: string;
  /** Names a missing file in a 404: `no <missing> "<path>"`. */
  readonly missing: string;
  /** The 503's detail when the files cannot be read for a reason that is no MnemeError. */
  readonly unreadable: string;
  /** Prefix of a problem's `type` URI. */
  readonly problemTypeBase: string;
}

/** The files of one place, read once and served from memory; subclasses say how they are read and which names may be asked. */
export abstract class StaticFiles {
  #loading: Promise<ReadonlyMap<string, StaticAsset>> | undefined;

  protected constructor(private readonly place: StaticFilesPlace) {}

  /** Reads every file (called on the first request, and again after a failure). */
  protected abstract load(): Promise<ReadonlyMap<string, StaticAsset>>;

  /** False for a name that gets 404 before any lookup. */
  protected acceptsName(name: string): boolean {
    return name.length > 0;
  }

  /** Answers one request whose path the place owns; for HEAD the caller leaves out the body. */
  async serve(request: DashboardRequest): Promise<DashboardReply> {
    const { method, path } = request;
    if (method !== "GET" && method !== "HEAD") {
      const allow = "GET, HEAD, OPTIONS";
      if (method === "OPTIONS") return { status: 204, headers: { allow } };
      return this.problem(405, "INVALID_REQUEST", `${method} is not allowed on ${path.slice(0, 200)}; allowed: ${allow}`, { allow });
    }
    if (path === this.place.path) return { status: 308, headers: { location: this.place.redirect, "cache-control": "no-cache" } };
    const name = path.slice(this.place.path.length + 1) || "index.html";
    if (!this.acceptsName(name)) return this.notFound(path);
    let assets: ReadonlyMap<string, StaticAsset>;
    try {
      assets = await this.assets();
    } catch (e) {
      // The message names no server path: anyone may ask for these files.
      return this.problem(503, "UNAVAILABLE", e instanceof MnemeError ? e.message : this.place.unreadable);
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

  private assets(): Promise<ReadonlyMap<string, StaticAsset>> {
    this.#loading ??= this.load().catch((e: unknown) => {
      this.#loading = undefined; // files that appear later (a build, a package installed) are picked up
      throw e;
    });
    return this.#loading;
  }

  private notFound(path: string): DashboardReply {
    return this.problem(404, "NOT_FOUND", `no ${this.place.missing} ${JSON.stringify(path.slice(0, 200))}`);
  }

  private problem(status: number, code: string, detail: string, headers: Record<string, string> = {}): DashboardReply {
    const title = status === 404 ? "Not Found" : status === 405 ? "Method Not Allowed" : "Service Unavailable";
    return {
      status,
      headers: { "content-type": "application/problem+json", "cache-control": "no-store", ...headers },
      body: JSON.stringify({ type: `${this.place.problemTypeBase}${code}`, title, status, detail, code }),
    };
  }
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

/** A file URL from a path (Windows drive letters and backslashes too). */
export function fileUrl(path: string): URL {
  return new URL(
    `file://${encodeURI(
      path
        .split("\\")
        .join("/")
        .replace(/^(?=[A-Za-z]:)/, "/"),
    )}`,
  );
}

/** A folder as a URL ending in `/`: a URL, a `file:` URL string, or a path (relative to the working directory). */
export function directoryUrl(dir: string | URL): URL {
  if (dir instanceof URL) return dir.href.endsWith("/") ? dir : new URL(`${dir.href}/`);
  if (dir.startsWith("file:")) return new URL(dir.endsWith("/") ? dir : `${dir}/`);
  const absolute = dir.startsWith("/") ? dir : `${process.cwd()}/${dir}`;
  return fileUrl(absolute.endsWith("/") ? absolute : `${absolute}/`);
}
