/**
 * `mneme openapi --app <module> [--out <file>]`: the OpenAPI 3.1 document of
 * an app's HTTP surface, as `GET /api/openapi.json` serves it. The app module
 * may export `httpOptions`, the options it gives createHttpHandler (its
 * `modules`, `basePath` and `openapi`), so the document lists the same routes.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Facade } from "../app/facade.js";
import { errorMessage, MnemeError } from "../model/errors.js";
import { buildOpenApiDocument } from "../http/openapi.js";
import type { OpenApiDocument, OpenApiServeOptions } from "../http/openapi-types.js";
import type { HttpRouteModule } from "../http/route.js";
import { loadAppModule } from "./load-app.js";

/** What the CLI reads of the app module's `httpOptions` export. */
interface AppHttpOptions {
  readonly modules?: readonly HttpRouteModule[];
  readonly basePath?: string;
  readonly openapi?: boolean | OpenApiServeOptions;
}

/**
 * The document of the app of `app` (its facade made, not started: domains,
 * schemas and permissions are known once it is configured).
 */
export async function openApiDocumentOfApp(app: string): Promise<OpenApiDocument> {
  const { facade, exports } = await loadAppModule(app);
  try {
    return documentOf(facade, httpOptionsOf(app, exports.httpOptions));
  } finally {
    await closeUnstarted(facade);
  }
}

function documentOf(facade: Facade, http: AppHttpOptions): OpenApiDocument {
  const openapi = http.openapi;
  const serve = typeof openapi === "object" && openapi !== null ? openapi : {};
  return buildOpenApiDocument(facade, {
    ...(http.modules === undefined ? {} : { modules: http.modules }),
    ...(http.basePath === undefined ? {} : { basePath: http.basePath }),
    ...(serve.info === undefined ? {} : { info: serve.info }),
    ...(serve.servers === undefined ? {} : { servers: serve.servers }),
    served: openapi === false ? false : (serve.access ?? "public"),
  });
}

/** The `httpOptions` export checked: absent, or an object whose `modules` is an array. */
function httpOptionsOf(app: string, value: unknown): AppHttpOptions {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null)
    throw new MnemeError("INVALID_REQUEST", `${app}: its httpOptions export must be the options given to createHttpHandler (an object)`);
  const opts = value as AppHttpOptions;
  if (opts.modules !== undefined && !Array.isArray(opts.modules))
    throw new MnemeError("INVALID_REQUEST", `${app}: httpOptions.modules must be an array of route modules`);
  if (opts.basePath !== undefined && typeof opts.basePath !== "string")
    throw new MnemeError("INVALID_REQUEST", `${app}: httpOptions.basePath must be a string`);
  return opts;
}

/** A facade that never started holds connections at most: stop releases them where it can. */
async function closeUnstarted(facade: Facade): Promise<void> {
  try {
    await facade.stop();
  } catch {
    // Stopping a facade that never started may be refused; there is nothing of ours to release then.
  }
}

/** Writes text atomically (temp file + rename), creating the directory: a failure never leaves half a file behind. */
export function writeFileAtomically(out: string, text: string): void {
  const target = resolve(out);
  const temp = `${target}.${process.pid}.tmp`;
  try {
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(temp, text);
    renameSync(temp, target);
  } catch (e) {
    rmSync(temp, { force: true });
    throw new MnemeError("INVALID_REQUEST", `cannot write "${out}": ${errorMessage(e)}`, { cause: e });
  }
}

/** `mneme openapi`: the document to `out`, or to stdout without it. Returns what it printed. */
export async function runOpenApiCommand(opts: { app: string; out?: string }, stdout: { write(s: string): unknown }): Promise<void> {
  const doc = await openApiDocumentOfApp(opts.app);
  const text = `${JSON.stringify(doc, null, 2)}\n`;
  if (opts.out === undefined) {
    stdout.write(text);
    return;
  }
  writeFileAtomically(opts.out, text);
  const operations = Object.values(doc.paths).reduce((n, item) => n + Object.keys(item).length, 0);
  stdout.write(`mneme: wrote the OpenAPI 3.1 document of ${doc.info.title} (${operations} operations) to ${opts.out}\n`);
}
