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
import { DASHBOARD_CSP, directoryUrl, etagOf, fileUrl, type StaticAsset, StaticFiles } from "./static-files.js";

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

/**
 * Serves the viewer from memory: the page and its start-up file are mneme's,
 * Swagger UI's bundle and stylesheet are read once, on the first request for
 * the viewer (through `node:fs` loaded only then); a missing package answers
 * 503 UNAVAILABLE and is looked for again on the next request.
 */
export class ApiViewer extends StaticFiles {
  constructor(private readonly options: ApiViewerOptions & { readonly problemTypeBase?: string; readonly resolve?: PackageResolver } = {}) {
    super({
      path: API_VIEWER_PATH,
      redirect: "docs/",
      missing: "API viewer file",
      unreadable: "the API viewer's files cannot be read",
      problemTypeBase: options.problemTypeBase ?? "urn:mneme:error:",
    });
  }

  /** True when `path` (below basePath) belongs to the viewer. */
  static owns(path: string): boolean {
    return path === API_VIEWER_PATH || path.startsWith(`${API_VIEWER_PATH}/`);
  }

  protected override async load(): Promise<ReadonlyMap<string, StaticAsset>> {
    const dir =
      this.options.swaggerUiDir === undefined ? await locateSwaggerUi(this.options.resolve) : directoryUrl(this.options.swaggerUiDir);
    const fs = await import("node:fs/promises");
    const assets = new Map<string, StaticAsset>();
    const add = async (name: string, body: string, contentType: string) =>
      assets.set(name, { body, contentType, etag: await etagOf(body), cacheControl: "no-cache" });
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
}
