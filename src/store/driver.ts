/**
 * The database drivers (better-sqlite3, pg) are optional peer dependencies:
 * an application installs the one it uses. They are loaded when a backend is
 * made, not when `mneme/sqlite` or `mneme/postgres` is imported, so a missing
 * one is a MnemeError naming the package and the command that installs it
 * instead of a bare ERR_MODULE_NOT_FOUND.
 */
import { createRequire } from "node:module";
import { MnemeError } from "../model/errors.js";

const load = createRequire(import.meta.url);

/** A driver the application installs: its package, the range mneme supports, and what needs it. */
export interface DriverPackage {
  readonly name: string;
  readonly range: string;
  /** The subpath that needs it, as the error names it (`mneme/sqlite`). */
  readonly neededBy: string;
  /** A sentence added to the error, e.g. about a native build. */
  readonly note?: string;
}

export const BETTER_SQLITE3: DriverPackage = {
  name: "better-sqlite3",
  range: "^13",
  neededBy: "mneme/sqlite",
  note: 'Or use the runtime\'s own SQLite, which needs no package: driver: "node:sqlite" (Node.js 22.16+, Deno) or driver: "bun:sqlite" (Bun)',
};

export const PG: DriverPackage = { name: "pg", range: "^8", neededBy: "mneme/postgres" };

/** `npm install <name>@<range>` */
export function driverInstallCommand(pkg: DriverPackage): string {
  return `npm install ${pkg.name}@${pkg.range}`;
}

/**
 * The driver's module (its CommonJS exports), loaded once by Node's cache.
 * @throws MnemeError INVALID_REQUEST naming the package and its install command when it is not installed.
 */
export function requireDriver<T>(pkg: DriverPackage): T {
  try {
    return load(pkg.name) as T;
  } catch (e) {
    if (isNotInstalled(e, pkg.name)) throw driverMissing(pkg);
    throw e;
  }
}

/** The error of a driver that is not installed: what needs it, and the install command. */
export function driverMissing(pkg: DriverPackage): MnemeError {
  return new MnemeError(
    "INVALID_REQUEST",
    `${pkg.neededBy} needs ${pkg.name}, which is not installed: it is an optional peer dependency of mneme, installed by the application that uses ${pkg.neededBy}. ` +
      `Install it: ${driverInstallCommand(pkg)}${pkg.note === undefined ? "" : `. ${pkg.note}`}`,
  );
}

function isNotInstalled(e: unknown, name: string): boolean {
  if (typeof e !== "object" || e === null) return false;
  const { code, message } = e as { code?: unknown; message?: unknown };
  return code === "MODULE_NOT_FOUND" && typeof message === "string" && message.includes(`'${name}'`);
}

/**
 * better-sqlite3 installed but its native module does not load (no prebuilt
 * binary for this platform, or one built for another Node.js ABI): the error
 * names the runtime's own driver, which needs none; other errors are
 * returned as they are.
 */
export function nativeBuildMissing(e: unknown): MnemeError | undefined {
  const message = e instanceof Error ? e.message : "";
  if (!/Could not locate the bindings file|NODE_MODULE_VERSION|was compiled against a different Node\.js version/.test(message))
    return undefined;
  return new MnemeError(
    "INVALID_REQUEST",
    `mneme/sqlite: better-sqlite3 is installed but its native module does not load on this ${runtimeName()} (${process.platform}-${process.arch}): ` +
      `reinstall it (npm install better-sqlite3@${BETTER_SQLITE3.range}: it ships prebuilt binaries), or use the runtime's own SQLite, which needs no native module: ` +
      `driver: "node:sqlite" (${message.split("\n")[0]})`,
    { cause: e },
  );
}

/**
 * A module built into the runtime (`node:sqlite`, `bun:sqlite`), loaded
 * synchronously: by `process.getBuiltinModule` where the runtime has it, else
 * by `require`. Undefined where the runtime has no such module, so a package
 * that names it still loads on every runtime.
 */
export function loadBuiltinModule<T>(specifier: string): T | undefined {
  const getBuiltin = (process as { getBuiltinModule?: (id: string) => unknown }).getBuiltinModule;
  if (typeof getBuiltin === "function") {
    try {
      const mod = getBuiltin.call(process, specifier);
      if (mod !== undefined) return mod as T;
    } catch {
      // Not a builtin of this runtime under that name: try require below.
    }
  }
  try {
    return load(specifier) as T;
  } catch {
    return undefined;
  }
}

/** The runtime and its version, as errors name it ("Node.js v24.1.0", "Bun 1.2.0", "Deno 2.1.0"). */
export function runtimeName(): string {
  const versions = process.versions as Record<string, string | undefined>;
  if (versions.bun !== undefined) return `Bun ${versions.bun}`;
  if (versions.deno !== undefined) return `Deno ${versions.deno}`;
  return `Node.js ${process.version}`;
}

export const NATS_JETSTREAM: DriverPackage = { name: "@nats-io/jetstream", range: "^3", neededBy: "mneme/nats" };
export const NATS_TRANSPORT: DriverPackage = { name: "@nats-io/transport-node", range: "^3", neededBy: "mneme/nats" };
export const AMQPLIB: DriverPackage = { name: "amqplib", range: "^2", neededBy: "mneme/amqp" };
