/**
 * Loads ts-json-schema-generator for `mneme schema build`, on demand.
 *
 * The generator pulls in the TypeScript compiler (~25 MB), which a production
 * install of mneme never runs, so it is an optional peer dependency: a project
 * that builds schemas installs it as a dev dependency. It is imported here
 * only, dynamically, when a build starts: `import "mneme"` and the CLI's other
 * commands never load it.
 */
import { createRequire } from "node:module";
import type * as Generator from "ts-json-schema-generator";
import type * as TS from "typescript";
import { errorMessage, MnemeError } from "../model/errors.js";

/** The package `mneme schema build` needs. */
export const GENERATOR_PACKAGE = "ts-json-schema-generator";
/** Its supported range: the peerDependencies (and devDependencies) entry of package.json. */
export const GENERATOR_RANGE = "~2.4.0";

/** The part of the generator's options that mneme sets. */
export interface GeneratorConfig {
  readonly path: string;
  readonly tsconfig: string;
  readonly expose: "export";
  readonly jsDoc: "extended";
  readonly topRef: boolean;
  readonly skipTypeCheck: boolean;
  readonly sortProps: boolean;
}

/** `createGenerator` of ts-json-schema-generator, as far as mneme uses it. */
export type CreateGenerator = (config: GeneratorConfig) => { createSchema(type?: string): unknown };

/**
 * The generator's parts `mneme schema build` drives itself: the program (to find
 * the types messages use), then a SchemaGenerator over that same program.
 */
export interface GeneratorParts {
  /** The `typescript` module the generator itself loads (the same SyntaxKind numbers). */
  readonly ts: typeof TS;
  readonly createProgram: typeof Generator.createProgram;
  readonly createParser: typeof Generator.createParser;
  readonly createFormatter: typeof Generator.createFormatter;
  readonly SchemaGenerator: typeof Generator.SchemaGenerator;
  readonly DEFAULT_CONFIG: typeof Generator.DEFAULT_CONFIG;
}

/** The command that installs the generator, as the missing-package error prints it. */
export function installCommand(moduleName: string = GENERATOR_PACKAGE): string {
  return moduleName === GENERATOR_PACKAGE
    ? `npm install --save-dev ${GENERATOR_PACKAGE}@${GENERATOR_RANGE}`
    : `npm install --save-dev ${moduleName}`;
}

/**
 * Imports `moduleName` (default ts-json-schema-generator) and returns its
 * `createGenerator`. The parameter exists for tests: any name that is not
 * installed gives the same error as a missing generator.
 * @throws MnemeError INVALID_REQUEST naming the package and the install command
 *   when it is not installed, or when it is installed but cannot be loaded
 *   (e.g. its own `typescript` dependency is missing).
 */
export async function loadGenerator(moduleName: string = GENERATOR_PACKAGE): Promise<CreateGenerator> {
  const mod = await importGenerator(moduleName);
  // A CommonJS package: its exports are named exports, and the default export too.
  const create = mod.createGenerator ?? mod.default?.createGenerator;
  if (typeof create !== "function") throw unsupported(moduleName, "createGenerator");
  const typed: CreateGenerator = create;
  return typed;
}

/**
 * Imports the generator (as {@link loadGenerator}) and returns the parts
 * `mneme schema build` composes, with the `typescript` module the generator resolves.
 * @throws MnemeError INVALID_REQUEST as {@link loadGenerator}.
 */
export async function loadGeneratorParts(moduleName: string = GENERATOR_PACKAGE): Promise<GeneratorParts> {
  const mod = await importGenerator(moduleName);
  const pick = <K extends keyof GeneratorParts>(key: K): GeneratorParts[K] => {
    const value = (mod[key as keyof typeof mod] ?? mod.default?.[key as keyof typeof Generator]) as GeneratorParts[K] | undefined;
    if (value === undefined) throw unsupported(moduleName, key);
    return value;
  };
  let ts: typeof TS;
  try {
    // The generator's own typescript: resolved from its location, not from mneme's.
    ts = createRequire(import.meta.resolve(moduleName))("typescript") as typeof TS;
  } catch (e) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `mneme schema build cannot load typescript (a dependency of ${moduleName}): ${firstLine(errorMessage(e))}. Reinstall it: ${installCommand(moduleName)}`,
      { cause: e },
    );
  }
  return {
    ts,
    createProgram: pick("createProgram"),
    createParser: pick("createParser"),
    createFormatter: pick("createFormatter"),
    SchemaGenerator: pick("SchemaGenerator"),
    DEFAULT_CONFIG: pick("DEFAULT_CONFIG"),
  };
}

type GeneratorModule = Partial<typeof Generator> & { default?: Partial<typeof Generator> };

async function importGenerator(moduleName: string): Promise<GeneratorModule> {
  let mod: GeneratorModule;
  try {
    mod = (await import(moduleName)) as typeof mod;
  } catch (e) {
    if (isMissing(e, moduleName)) {
      throw new MnemeError(
        "INVALID_REQUEST",
        `mneme schema build needs ${moduleName}, which is not installed: it is an optional peer dependency of mneme, used at build time only. Install it as a dev dependency: ${installCommand(moduleName)}`,
        { cause: e },
      );
    }
    throw new MnemeError(
      "INVALID_REQUEST",
      `mneme schema build cannot load ${moduleName}: ${firstLine(errorMessage(e))}. Reinstall it: ${installCommand(moduleName)}`,
      { cause: e },
    );
  }
  return mod;
}

function unsupported(moduleName: string, member: string): MnemeError {
  return new MnemeError(
    "INVALID_REQUEST",
    `${moduleName} has no ${member} export (an unsupported version?): ${installCommand(moduleName)}`,
  );
}

/**
 * Whether the import failed because `moduleName` itself is not installed (not
 * because something it imports is missing: that message names the other
 * package, with `moduleName` only in the path of the importing file).
 */
function isMissing(e: unknown, moduleName: string): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (code !== "ERR_MODULE_NOT_FOUND" && code !== "MODULE_NOT_FOUND") return false;
  const message = errorMessage(e);
  return message.includes(`'${moduleName}'`) || message.includes(`"${moduleName}"`);
}

function firstLine(s: string): string {
  return s.split("\n", 1)[0]!;
}
