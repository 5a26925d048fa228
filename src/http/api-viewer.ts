/**
 * The API viewer: Swagger UI over the handler's own OpenAPI document, served
 * under `<basePath>/api/docs/` when `createHttpHandler(facade, { apiViewer:
 * true })` (docs/http.md, "API viewer"). Swagger UI's files come from the
 * optional peer dependency `swagger-ui-dist`, found at run time (never
 * imported: without it mneme loads and works, and the viewer answers a
 * problem saying to install it). Everything the page loads is served here:
 * no CDN, no validator badge, no request to another origin.
 */
import { MnemeError } from "../model/errors.js";
import { DASHBOARD_CSP, type DashboardReply, type DashboardRequest, etagMatches, etagOf } from "./dashboard.js";

/** The path prefix the viewer is served under (below basePath). */
export const API_VIEWER_PATH = "/api/docs";

/** `apiViewer` of createHttpHandler: true, or where Swagger UI's files are (a vendored copy of swagger-ui-dist). */
export interface ApiViewerOptions {
  /** A folder holding swagger-ui-dist's `swagger-ui-bundle.js` and `swagger-ui.css`. Default: the installed `swagger-ui-dist` package. */
  readonly swaggerUiDir?: string | URL;
}

/**
 * The dashboard's policy, unchanged: scripts and styles only from the
 * viewer's own files (no inline script: the page's start-up code is a file;
 * Swagger UI sets its styles through the DOM, which the policy allows),
 * requests to the same origin only (the document, "Try it out").
 */
export const API_VIEWER_CSP = DASHBOARD_CSP;

const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  "content-security-policy": API_VIEWER_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
});

const HTML = "text/html; charset=utf-8";
const JS = "text/javascript; charset=utf-8";
const CSS = "text/css; charset=utf-8";

/** The page: Swagger UI's stylesheet and bundle, then the start-up file; the icon is empty (nothing asked for it). */
const INDEX_HTML = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>API · mneme</title>
    <link rel="icon" href="data:," />
    <link rel="stylesheet" href="swagger-ui.css" />
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="swagger-ui-bundle.js"></script>
    <script src="viewer.js"></script>
  </body>
</html>
`;

/**
 * Starts Swagger UI on the document next to this folder (`../openapi.json`,
 * so it follows any basePath); no validator (it would send the document to
 * validator.swagger.io), no external anything.
 */
const VIEWER_JS = `"use strict";
window.ui = SwaggerUIBundle({
  url: new URL("../openapi.json", window.location.href).href,
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  validatorUrl: null,
  tryItOutEnabled: false,
  displayRequestDuration: true,
  persistAuthorization: false,
});
`;

/** The files of swagger-ui-dist the page loads, and where they are read from. */
const PACKAGE_FILES: Readonly<Record<string, string>> = Object.freeze({ "swagger-ui-bundle.js": JS, "swagger-ui.css": CSS });

interface Asset {
  readonly body: string;
  readonly contentType: string;
  readonly etag: string;
}

/** How the viewer finds an installed package (createRequire's resolve); replaceable in tests. */
export type PackageResolver = (specifier: string) => Promise<string>;

/** The folder of the installed swagger-ui-dist, or UNAVAILABLE saying how to install it. */
export async function locateSwaggerUi(resolve: PackageResolver = resolveFromHere): Promise<URL> {
  let packageJson: string;
  try {
    packageJson = await resolve("swagger-ui-dist/package.json");
  } catch (e) {
    throw new MnemeError(
      "UNAVAILABLE",
      "the API viewer needs the optional package swagger-ui-dist, which is not installed: npm install swagger-ui-dist (or pass apiViewer: { swaggerUiDir })",
      { cause: e },
    );
  }
  const url = packageJson.startsWith("file:") ? new URL(packageJson) : fileUrl(packageJson);
  return new URL("./", url);
}

/** Resolves from mneme's own folder first, then from the working directory (an app whose package manager keeps peers apart). */
async function resolveFromHere(specifier: string): Promise<string> {
  const { createRequire } = await import("node:module");
  try {
    return createRequire(import.meta.url).resolve(specifier);
  } catch (e) {
    if (typeof process === "undefined") throw e;
    return createRequire(`${process.cwd()}/`).resolve(specifier);
  }
}

function fileUrl(path: string): URL {
  return new URL(
    `file://${encodeURI(
      path
        .split("\\")
        .join("/")
        .replace(/^(?=[A-Za-z]:)/, "/"),
    )}`,
  );
}

function directoryUrl(dir: string | URL): URL {
  if (dir instanceof URL) return dir.href.endsWith("/") ? dir : new URL(`${dir.href}/`);
  if (dir.startsWith("file:")) return new URL(dir.endsWith("/") ? dir : `${dir}/`);
  const absolute = dir.startsWith("/") ? dir : `${process.cwd()}/${dir}`;
  return fileUrl(absolute.endsWith("/") ? absolute : `${absolute}/`);
}

/**
 * Serves the viewer from memory: the page and its start-up file are mneme's,
 * Swagger UI's bundle and stylesheet are read once, on the first request for
 * the viewer (through `node:fs` loaded only then); a missing package answers
 * 503 UNAVAILABLE and is looked for again on the next request.
 */
export class ApiViewer {
  private readonly typeBase: string;
  private loading: Promise<ReadonlyMap<string, Asset>> | undefined;

  constructor(private readonly options: ApiViewerOptions & { readonly problemTypeBase?: string; readonly resolve?: PackageResolver } = {}) {
    this.typeBase = options.problemTypeBase ?? "urn:mneme:error:";
  }

  /** True when `path` (below basePath) belongs to the viewer. */
  static owns(path: string): boolean {
    return path === API_VIEWER_PATH || path.startsWith(`${API_VIEWER_PATH}/`);
  }

  /** Answers one request whose path the viewer owns; for HEAD the caller leaves out the body. */
  async serve(request: DashboardRequest): Promise<DashboardReply> {
    const { method, path } = request;
    if (method !== "GET" && method !== "HEAD") {
      const allow = "GET, HEAD, OPTIONS";
      if (method === "OPTIONS") return { status: 204, headers: { allow } };
      return this.problem(405, "INVALID_REQUEST", `${method} is not allowed on ${path.slice(0, 200)}; allowed: ${allow}`, { allow });
    }
    // Relative, so it stays right below any basePath.
    if (path === API_VIEWER_PATH) return { status: 308, headers: { location: "docs/", "cache-control": "no-cache" } };
    const name = path.slice(API_VIEWER_PATH.length + 1) || "index.html";
    let assets: ReadonlyMap<string, Asset>;
    try {
      assets = await this.assets();
    } catch (e) {
      // The message names no server path: anyone may ask for the viewer.
      const reason = e instanceof MnemeError ? e.message : "the API viewer's files cannot be read";
      return this.problem(503, "UNAVAILABLE", reason);
    }
    const asset = assets.get(name);
    if (asset === undefined) return this.problem(404, "NOT_FOUND", `no API viewer file ${JSON.stringify(path.slice(0, 200))}`);
    const headers = { ...SECURITY_HEADERS, "content-type": asset.contentType, "cache-control": "no-cache", etag: asset.etag };
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
    this.loading ??= this.load().catch((e: unknown) => {
      this.loading = undefined; // a package installed later is picked up
      throw e;
    });
    return this.loading;
  }

  private async load(): Promise<ReadonlyMap<string, Asset>> {
    const dir =
      this.options.swaggerUiDir === undefined ? await locateSwaggerUi(this.options.resolve) : directoryUrl(this.options.swaggerUiDir);
    const fs = await import("node:fs/promises");
    const assets = new Map<string, Asset>();
    const add = async (name: string, body: string, contentType: string) =>
      assets.set(name, { body, contentType, etag: await etagOf(body) });
    await add("index.html", INDEX_HTML, HTML);
    await add("viewer.js", VIEWER_JS, JS);
    for (const [name, contentType] of Object.entries(PACKAGE_FILES)) {
      let body: string;
      try {
        body = await fs.readFile(new URL(name, dir), "utf8");
      } catch (e) {
        throw new MnemeError("UNAVAILABLE", `the API viewer's Swagger UI is incomplete: no ${name} in swagger-ui-dist`, { cause: e });
      }
      await add(name, body, contentType);
    }
    return assets;
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
