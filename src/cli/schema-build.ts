/**
 * `mneme schema build`: JSON Schema 2020-12 for the payload types of the
 * messages declared in source files (or selected types), through ts-json-schema-generator. Build time only: it loads the
 * TypeScript compiler (~1 s cold), which is why schemas are never generated in a request.
 * The generator is an optional peer dependency, imported on demand (load-generator.ts).
 */
import type ts from "typescript";
import type * as TS from "typescript";
import { mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { errorMessage, MnemeError } from "../model/errors.js";
import type { JsonSchema } from "../model/types.js";
import { convertTo2020_12, JSON_SCHEMA_2020_12 } from "../schema/convert-2020-12.js";
import { loadGeneratorParts } from "./load-generator.js";
import { matchFiles } from "./match-files.js";

/** Options of {@link buildSchemas}, the flags of `mneme schema build`. */
export interface BuildSchemasOptions {
  /** The tsconfig.json whose compiler options apply. */
  readonly tsconfig: string;
  /** A glob of source files (`*`, `**`, `?`, `[..]`, `{a,b}`), relative to `cwd`. */
  readonly path: string;
  /**
   * Only these exported types (exact names) and what they reference, instead of the
   * types messages use. Classes and functions are refused: they are not payloads.
   */
  readonly types?: readonly string[] | undefined;
  /** Every exported type (interfaces, type aliases, enums), used by a message or not. Combines with `types`. */
  readonly allExports?: boolean | undefined;
  /** Base of relative paths; default `process.cwd()`. */
  readonly cwd?: string | undefined;
}

/** What {@link buildSchemas} returns and the CLI writes: the input of `createFacade({ schemas })`. */
export interface SchemasDocument {
  $schema: typeof JSON_SCHEMA_2020_12;
  $defs: Record<string, JsonSchema>;
}

/** What a build emitted and left out, as the CLI prints it. */
export interface BuildReport {
  /** How the roots were chosen: the message calls, `--types`, `--all-exports`. */
  readonly selection: "messages" | "types" | "all-exports";
  /** Number of `.command<T>()`, `.query<T, R>()`, `.event<T>()` calls found (selection "messages"). */
  readonly messages: number;
  /** The root type names (before adding what they reference). */
  readonly roots: readonly string[];
  /** Exported types, classes and functions of the files that are not in `$defs`, sorted. */
  readonly skipped: readonly string[];
  /** Type arguments that name no declared type (inline literals, library types), as written. */
  readonly unnamed: readonly string[];
}

/** The document and the report of {@link buildSchemasWithReport}. */
export interface BuildResult {
  readonly doc: SchemasDocument;
  readonly report: BuildReport;
}

/**
 * Generates the schemas of the types messages use in the files matching `path`
 * (JSDoc honoured: `@format`, `@minimum`, `@pattern`, descriptions ...) and
 * converts them to 2020-12. See {@link buildSchemasWithReport}.
 * @example
 * const doc = await buildSchemas({ tsconfig: "tsconfig.json", path: "src/domain/*.ts" });
 */
export async function buildSchemas(opts: BuildSchemasOptions): Promise<SchemasDocument> {
  return (await buildSchemasWithReport(opts)).doc;
}

const MESSAGE_METHODS: ReadonlySet<string> = new Set(["command", "query", "event"]);

/**
 * Builds the schemas and says what was left out. By default the roots are the type
 * names used as type arguments of `X.command<T>(...)`, `X.query<T, R>(...)` and
 * `X.event<T>(...)` in the matched files, found on the TypeScript program the
 * generator builds; `$defs` holds them and every type they reference. `types`
 * and/or `allExports` select the roots instead. Classes and functions are never emitted.
 * @throws MnemeError INVALID_REQUEST when ts-json-schema-generator is not
 *   installed (naming the install command), the tsconfig or the files are missing,
 *   a named type is unknown, a class or a function, the files declare no message
 *   (by default), or the generator fails (its message is kept).
 */
export async function buildSchemasWithReport(opts: BuildSchemasOptions): Promise<BuildResult> {
  // First: without the generator no other check helps.
  const parts = await loadGeneratorParts();
  const cwd = resolve(opts.cwd ?? process.cwd());
  const tsconfig = resolve(cwd, opts.tsconfig);
  if (!statSync(tsconfig, { throwIfNoEntry: false })?.isFile()) {
    throw new MnemeError("INVALID_REQUEST", `tsconfig "${opts.tsconfig}" is not a file (relative to ${cwd})`);
  }
  const files = matchFiles(opts.path, cwd);
  if (files.length === 0) throw new MnemeError("INVALID_REQUEST", `--path "${opts.path}" matches no file (relative to ${cwd})`);
  const { ts } = parts;
  let raw: JsonSchema;
  let roots: ts.Node[];
  let report: Omit<BuildReport, "skipped">;
  let sourceFiles: ts.SourceFile[];
  let checker: ts.TypeChecker;
  try {
    const config = {
      ...parts.DEFAULT_CONFIG,
      path: resolve(cwd, opts.path),
      tsconfig,
      expose: "export" as const,
      jsDoc: "extended" as const,
      // topRef true: with several root types and topRef false the generator emits only
      // the types they reference, not the roots themselves.
      topRef: true,
      skipTypeCheck: true,
      sortProps: false,
    };
    const program = parts.createProgram(config);
    checker = program.getTypeChecker();
    const rootNames = new Set(program.getRootFileNames());
    sourceFiles = program.getSourceFiles().filter((f) => rootNames.has(f.fileName));
    const generator = new parts.SchemaGenerator(program, parts.createParser(program, config), parts.createFormatter(config), config);
    // getRootNodes is the generator's own lookup of exported types by name ("*": all).
    const lookup = generator as unknown as { getRootNodes(name: string): ts.Node[] };
    const selected = selectRoots(ts, checker, sourceFiles, opts, (name) => lookup.getRootNodes(name));
    roots = selected.nodes;
    report = selected.report;
    raw = generator.createSchemaFromNodes(roots) as JsonSchema;
  } catch (e) {
    if (e instanceof MnemeError) throw e;
    throw new MnemeError("INVALID_REQUEST", `schema generation failed: ${generatorMessage(e)}`, { cause: e });
  }
  const converted = convertTo2020_12(raw);
  const defs = (converted.$defs ?? {}) as Record<string, JsonSchema>;
  for (const name of opts.types ?? []) {
    if (!(name in defs)) throw new MnemeError("INVALID_REQUEST", `type "${name}" produced no schema`);
  }
  // A generic counts as emitted when one of its instantiations (`Page<Item>`) is.
  const emitted = new Set(Object.keys(defs).map((name) => name.replace(/<.*$/s, "")));
  const skipped = exportedDeclarations(ts, checker, sourceFiles)
    .map((d) => d.name)
    .filter((name) => !emitted.has(name));
  return {
    doc: { $schema: JSON_SCHEMA_2020_12, $defs: defs },
    report: { ...report, skipped: [...new Set(skipped)].sort() },
  };
}

interface Selected {
  readonly nodes: ts.Node[];
  readonly report: Omit<BuildReport, "skipped">;
}

function selectRoots(
  ts: typeof TS,
  checker: ts.TypeChecker,
  sourceFiles: readonly ts.SourceFile[],
  opts: BuildSchemasOptions,
  byName: (name: string) => ts.Node[],
): Selected {
  const notPayload = (node: ts.Node): boolean =>
    ts.isClassDeclaration(node) ||
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isConstructorTypeNode(node);
  if (opts.types !== undefined || opts.allExports === true) {
    const nodes: ts.Node[] = [];
    for (const name of opts.types ?? []) {
      let found: ts.Node[];
      try {
        found = byName(name);
      } catch (e) {
        throw new MnemeError("INVALID_REQUEST", `--types: no exported type "${name}" (${generatorMessage(e)})`, { cause: e });
      }
      const bad = found.find(notPayload);
      if (bad !== undefined) {
        throw new MnemeError(
          "INVALID_REQUEST",
          `--types: "${name}" is a ${ts.isClassDeclaration(bad) ? "class" : "function"}, not a payload type`,
        );
      }
      nodes.push(...found);
    }
    if (opts.allExports === true) nodes.push(...byName("*").filter((n) => !notPayload(n)));
    return {
      nodes: [...new Set(nodes)],
      report: {
        selection: opts.allExports === true ? "all-exports" : "types",
        messages: 0,
        roots: opts.allExports === true ? [] : [...(opts.types ?? [])],
        unnamed: [],
      },
    };
  }
  const found = messageTypeArguments(ts, sourceFiles);
  if (found.calls === 0) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `no .command<T>(), .query<T, R>() or .event<T>() call in the files of --path "${opts.path}": point it at the files that define the messages, or select types with --types or --all-exports`,
    );
  }
  const nodes: ts.Node[] = [];
  const roots: string[] = [];
  const unnamed: string[] = [];
  for (const arg of found.args) {
    const node = rootOf(ts, checker, arg);
    if (node === undefined) unnamed.push(arg.getText());
    else if (!nodes.includes(node)) {
      nodes.push(node);
      roots.push(ts.isTypeReferenceNode(node) ? node.getText() : arg.getText());
    }
  }
  return { nodes, report: { selection: "messages", messages: found.calls, roots, unnamed: [...new Set(unnamed)] } };
}

/** The payload type arguments of the message calls in `files`: `T` of command/event, `T` and `R` of query. */
function messageTypeArguments(ts: typeof TS, files: readonly ts.SourceFile[]): { calls: number; args: ts.TypeNode[] } {
  let calls = 0;
  const args: ts.TypeNode[] = [];
  const visit = (node: ts.Node): void => {
    if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      MESSAGE_METHODS.has(node.expression.name.text) &&
      node.typeArguments !== undefined &&
      node.typeArguments.length > 0
    ) {
      calls += 1;
      args.push(...node.typeArguments.slice(0, node.expression.name.text === "query" ? 2 : 1));
    }
    ts.forEachChild(node, visit);
  };
  for (const file of files) visit(file);
  return { calls, args };
}

/**
 * The node the generator starts from for a type argument: the declaration of a
 * named interface, type alias or enum (the reference itself for a generic
 * instantiation such as `Page<Item>`), or undefined for inline types and types
 * declared in libraries (`.d.ts` files).
 */
function rootOf(ts: typeof TS, checker: ts.TypeChecker, arg: ts.TypeNode): ts.Node | undefined {
  if (!ts.isTypeReferenceNode(arg)) return undefined;
  let symbol = checker.getSymbolAtLocation(arg.typeName);
  if (symbol !== undefined && (symbol.flags & ts.SymbolFlags.Alias) !== 0) symbol = checker.getAliasedSymbol(symbol);
  const declaration = symbol?.declarations?.find(
    (d) => ts.isInterfaceDeclaration(d) || ts.isTypeAliasDeclaration(d) || ts.isEnumDeclaration(d),
  );
  if (declaration === undefined || declaration.getSourceFile().isDeclarationFile) return undefined;
  return arg.typeArguments !== undefined && arg.typeArguments.length > 0 ? arg : declaration;
}

/** The exported interfaces, type aliases, enums, classes and functions of `files` (re-exports included). */
function exportedDeclarations(ts: typeof TS, checker: ts.TypeChecker, files: readonly ts.SourceFile[]): { name: string }[] {
  const kinds = ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias | ts.SymbolFlags.Enum | ts.SymbolFlags.Class | ts.SymbolFlags.Function;
  const out: { name: string }[] = [];
  for (const file of files) {
    const module = checker.getSymbolAtLocation(file);
    if (module === undefined) continue;
    for (const exported of checker.getExportsOfModule(module)) {
      const target = (exported.flags & ts.SymbolFlags.Alias) !== 0 ? checker.getAliasedSymbol(exported) : exported;
      if ((target.flags & kinds) !== 0) out.push({ name: exported.name });
    }
  }
  return out;
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
