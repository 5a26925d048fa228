/**
 * `mneme schema build`: JSON Schema 2020-12 for the exported types of source
 * files, through ts-json-schema-generator. Build time only: it loads the
 * TypeScript compiler (~1 s cold), which is why schemas are never generated in a request.
 * The generator is an optional peer dependency, imported on demand (load-generator.ts).
 */
import { mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { errorMessage, MnemeError } from "../model/errors.js";
import type { JsonSchema } from "../model/types.js";
import { convertTo2020_12, JSON_SCHEMA_2020_12 } from "../schema/convert-2020-12.js";
import { loadGenerator } from "./load-generator.js";
import { matchFiles } from "./match-files.js";

/** Options of {@link buildSchemas}, the flags of `mneme schema build`. */
export interface BuildSchemasOptions {
  /** The tsconfig.json whose compiler options apply. */
  readonly tsconfig: string;
  /** A glob of source files (`*`, `**`, `?`, `[..]`, `{a,b}`), relative to `cwd`. */
  readonly path: string;
  /** Only this exported type (and what it references); default: every exported type. */
  readonly type?: string | undefined;
  /** Base of relative paths; default `process.cwd()`. */
  readonly cwd?: string | undefined;
}

/** What {@link buildSchemas} returns and the CLI writes: the input of `createFacade({ schemas })`. */
export interface SchemasDocument {
  $schema: typeof JSON_SCHEMA_2020_12;
  $defs: Record<string, JsonSchema>;
}

/**
 * Generates the schemas of every exported type of the files matching `path`
 * (JSDoc honoured: `@format`, `@minimum`, `@pattern`, descriptions ...) and
 * converts them to 2020-12.
 * @throws MnemeError INVALID_REQUEST when ts-json-schema-generator is not
 *   installed (naming the install command), the tsconfig or the files are missing,
 *   the type is unknown, or the generator fails (its message is kept).
 * @example
 * const doc = await buildSchemas({ tsconfig: "tsconfig.json", path: "src/domain/*.ts" });
 */
export async function buildSchemas(opts: BuildSchemasOptions): Promise<SchemasDocument> {
  // First: without the generator no other check helps.
  const createGenerator = await loadGenerator();
  const cwd = resolve(opts.cwd ?? process.cwd());
  const tsconfig = resolve(cwd, opts.tsconfig);
  if (!statSync(tsconfig, { throwIfNoEntry: false })?.isFile()) {
    throw new MnemeError("INVALID_REQUEST", `tsconfig "${opts.tsconfig}" is not a file (relative to ${cwd})`);
  }
  const files = matchFiles(opts.path, cwd);
  if (files.length === 0) throw new MnemeError("INVALID_REQUEST", `--path "${opts.path}" matches no file (relative to ${cwd})`);
  let raw: JsonSchema;
  try {
    const generator = createGenerator({
      path: resolve(cwd, opts.path),
      tsconfig,
      expose: "export",
      jsDoc: "extended",
      // topRef true: with several root types and topRef false the generator emits only
      // the types they reference, not the roots themselves.
      topRef: true,
      skipTypeCheck: true,
      sortProps: false,
    });
    raw = generator.createSchema(opts.type ?? "*") as JsonSchema;
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", `schema generation failed: ${generatorMessage(e)}`, { cause: e });
  }
  const converted = convertTo2020_12(raw);
  const defs = (converted.$defs ?? {}) as Record<string, JsonSchema>;
  if (opts.type !== undefined && !(opts.type in defs)) {
    throw new MnemeError("INVALID_REQUEST", `type "${opts.type}" produced no schema`);
  }
  return { $schema: JSON_SCHEMA_2020_12, $defs: defs };
}

/**
 * Writes the schemas as pretty JSON, atomically (temp file + rename), creating the
 * directory: a failed build never leaves a half-written schemas file behind.
 */
export function writeSchemasFile(out: string, doc: SchemasDocument): void {
  const target = resolve(out);
  mkdirSync(dirname(target), { recursive: true });
  const temp = `${target}.${process.pid}.tmp`;
  try {
    writeFileSync(temp, `${JSON.stringify(doc, null, 2)}\n`);
    renameSync(temp, target);
  } catch (e) {
    rmSync(temp, { force: true });
    throw new MnemeError("INVALID_REQUEST", `cannot write "${out}": ${errorMessage(e)}`, { cause: e });
  }
}

function generatorMessage(e: unknown): string {
  // The generator's errors carry a TypeScript diagnostic; format() gives file and line.
  const format = (e as { format?: () => string } | null)?.format;
  if (typeof format === "function") {
    try {
      return format.call(e).trim();
    } catch {
      // fall through to the plain message
    }
  }
  return errorMessage(e);
}
