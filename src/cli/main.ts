#!/usr/bin/env node
/**
 * The `mneme` binary. Parses argv only; the work is in schema-build.ts,
 * privacy-migrate.ts, upgrade.ts, store-copy.ts, store-retention.ts, seed.ts, openapi.ts and client.ts. Exit codes: 0 done, 1 the command failed (also:
 * ts-json-schema-generator is not installed), 2 usage error. Only
 * `schema build` loads the generator.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { errorMessage } from "../model/errors.js";
import { runClientCommand } from "./client.js";
import { runOpenApiCommand } from "./openapi.js";
import { runPrivacyCommand } from "./privacy-migrate.js";
import { buildSchemasWithReport, writeSchemasFile } from "./schema-build.js";
import { runSeedCommand } from "./seed.js";
import { runStoreCopy } from "./store-copy.js";
import { runStoreRetention } from "./store-retention.js";
import { runStoreVerify } from "./store-verify.js";
import { parseBefore, runStoreArchive } from "./store-archive.js";
import { runUpgradeCommand } from "./upgrade.js";

const USAGE = `Usage:
  mneme schema build --tsconfig <file> --path <glob> --out <file> [--types <a,b>] [--all-exports]
  mneme privacy check --app <module>
  mneme privacy migrate --app <module> [--dry-run] [--batch-size <n>]
  mneme privacy forget --app <module> <subject>
  mneme upgrade status --app <module>
  mneme upgrade finish --app <module> [--settle-ms <n>] [--batch-size <n>]
  mneme store copy --from <file or postgres url> --to <postgres url or file> [--resume] [--batch-size <n>]
  mneme store verify --store <file or postgres url> [--batch-size <n>] [--archive-dir <dir>]
  mneme store retention --app <module> [--dry-run] [--batch-size <n>]
  mneme store archive --store <file or postgres url> --before <position or ISO date> --to <dir> [--segment-events <n>]
  mneme store archive --restore --store <file or postgres url> [--from <dir>]
  mneme seed --app <module> --file <json>
  mneme openapi --app <module> [--out <file>]
  mneme client --app <module> --out <file>
  mneme --help | --version

Commands:
  schema build   Generate JSON Schema 2020-12 for the payload types of the messages
                 declared in the files matching <glob> (quote it): the T of
                 X.command<T>(), X.event<T>() and the T, R of X.query<T, R>(), and
                 every type they reference. Write { "$schema", "$defs" } to <file>,
                 the input of createFacade({ schemas }), and print what was emitted
                 and which exports were skipped. Classes and functions are never
                 emitted. Standard Schema validators (zod, valibot, arktype) need
                 no build step. JSDoc tags such as
                 @format email, @minimum 0, @pattern are honoured. Needs the
                 ts-json-schema-generator package (a dev dependency of your project).
  privacy check  Start the app of <module> and print which subjects have personal
                 data stored in clear (written before their type declared it).
  privacy migrate
                 Start the app of <module> and seal that data in place, so forget
                 erases it (resumable; see docs/upgrading.md). Prints the report.
  privacy forget Start the app of <module> and erase the data subject <subject>:
                 its keys deleted, its personal fields read "[erased]" from then on
                 (facade.forget; see docs/privacy.md). Prints { keysDeleted }.
  upgrade status Start the app of <module> and print whether its store is in a
                 rolling deploy's compatibility mode (rollingFrom) and its format.
  upgrade finish End a rolling deploy's compatibility mode once no instance of the
                 older release runs: the stores refuse its writers again, then what
                 it wrote in clear is sealed (docs/upgrading.md). Idempotent.
  store copy     Copy a whole store (events with their positions, command records,
                 keys, snapshots, readmodel documents and checkpoints, logs) from a
                 SQLite file or Postgres schema into an empty one, then compare
                 rows and a SHA-256 per table on both sides; exit 1 if one differs.
                 A Postgres URL names its schema with ?schema= (default public).
                 Stop the app's writers first (see docs/scaling.md).
  store verify   Recompute the hash chain of a store's events (each event's hash
                 follows the one before it; see docs/operations.md) and compare it
                 with the stored hashes, page by page; exit 1 and print the first
                 broken position when one differs. Events removed by retention
                 are counted: each must link to the chain and have its run's
                 removal record in it.
                 Archived events are verified in their files (SHA-256 of each)
                 within the same chain.
  store retention
                 Start the app of <module> and run retention: events older than
                 their type's retainFor become tombstones (never one a live
                 aggregate needs without a snapshot), log entries older than
                 retention.logs go, the run is recorded in the event chain
                 (docs/operations.md, Retention). --dry-run lists what would go.
                 Prints the report.
  store archive  Move the events below --before (a position, or the first event
                 created at or after an ISO date) to gzip JSON-lines files under
                 <dir> with a manifest (SHA-256 per file, chain head), verified
                 before the rows are deleted; reads go on seeing them. Refused
                 while a handler's checkpoint or a snapshot still needs them.
                 Each aggregate's first and newest event and tagged events stay
                 in the database. --restore brings every archived event back,
                 as stored (see docs/operations.md, "Archiving old events").
  seed           Start the app of <module> (with registerDefaults) and create the
                 tenants, groups, accounts and identities of <json> that are
                 missing, as a system administrator; what exists is left as it
                 is, so a second run changes nothing (docs/auth.md, Seeding).
                 Prints what it created.
  openapi        Write the OpenAPI 3.1 document of the app of <module>: every
                 command and query with its payload's JSON Schema, the Runtime
                 routes and the route modules of its exported httpOptions, with
                 permissions and problem answers (docs/clients.md). To <file>,
                 or to stdout without --out.
  client         Write a typed client of the app of <module> to <file>: one
                 dependency-free TypeScript file (fetch), a function per command
                 and query typed by its payload schema (docs/clients.md).

Options:
  --tsconfig <file>  tsconfig.json whose compiler options apply
  --path <glob>      source files: *, **, ?, [abc], {a,b}
  --out <file>       output JSON file (written atomically; directories are created)
  --types <a,b>      instead of the message types: these exported types (exact
                     names, comma-separated) and what they reference
  --all-exports      instead of the message types: every exported interface,
                     type alias and enum (combines with --types)
  --type <name>      the same as --types <name>
  --app <module>     a module whose default export returns the app's facade, not started
  --settle-ms <n>    upgrade finish: wait after refusing old writers (default 1000)
  --dry-run          privacy migrate: report what would be sealed, write nothing;
                     store retention: list what would go, remove nothing
  --batch-size <n>   events per page of the migration (default 500); rows per
                     page of a store copy (default 2000)
  --from <store>     store copy: the source, a SQLite file or postgres:// URL
  --to <store>       store copy: the target (empty, or an interrupted copy with --resume)
  --resume           store copy: continue a copy into this target that was interrupted
  --store <store>    store verify, store archive: a SQLite file or postgres:// URL (?schema=)
  --before <p|date>  store archive: the boundary, a position or an ISO date
  --to <dir>         store archive: the archive directory
  --restore          store archive: bring the archived events back into the database
  --from <dir>       store archive --restore: where the archive is now, if it was moved
  --archive-dir <d>  store verify: where the store's archive is now, if it was moved
  --segment-events <n>  store archive: events per archive file (default 20000)
  --file <json>      seed: the seed file
  -h, --help         show this help
  -v, --version      show the version
`;

class UsageError extends Error {}

function version(): string {
  // src/cli/main.ts and dist/cli/main.js both sit two levels below package.json.
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: string };
  return pkg.version ?? "unknown";
}

const OPTIONS = {
  tsconfig: { type: "string" },
  path: { type: "string" },
  out: { type: "string" },
  type: { type: "string" },
  types: { type: "string" },
  "all-exports": { type: "boolean" },
  app: { type: "string" },
  "dry-run": { type: "boolean" },
  "settle-ms": { type: "string" },
  "batch-size": { type: "string" },
  from: { type: "string" },
  to: { type: "string" },
  resume: { type: "boolean" },
  store: { type: "string" },
  before: { type: "string" },
  restore: { type: "boolean" },
  "archive-dir": { type: "string" },
  "segment-events": { type: "string" },
  file: { type: "string" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean", short: "v" },
} as const;

function parse(argv: readonly string[]) {
  try {
    return parseArgs({ args: [...argv], allowPositionals: true, strict: true, options: OPTIONS });
  } catch (e) {
    throw new UsageError(errorMessage(e));
  }
}

type Values = ReturnType<typeof parse>["values"];

async function run(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parse(argv);
  if (values.help === true || positionals[0] === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  if (values.version === true) {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  if (positionals.length === 0) throw new UsageError("no command given");
  if (positionals[0] === "privacy") return privacyCommand(positionals, values);
  if (positionals[0] === "upgrade") return upgradeCommand(positionals, values);
  if (positionals[0] === "store" && positionals[1] === "verify") return storeVerify(positionals, values);
  if (positionals[0] === "store" && positionals[1] === "retention") return storeRetention(positionals, values);
  if (positionals[0] === "store" && positionals[1] === "archive") return storeArchive(positionals, values);
  if (positionals[0] === "store") return storeCopy(positionals, values);
  if (positionals[0] === "seed") return seedCommand(positionals, values);
  if (positionals[0] === "openapi" || positionals[0] === "client") return documentCommand(positionals, values);
  if (positionals[0] !== "schema" || positionals[1] !== "build") {
    throw new UsageError(`unknown command "${positionals.join(" ")}"`);
  }
  return schemaBuild(positionals, values);
}

async function privacyCommand(positionals: readonly string[], values: Values): Promise<number> {
  const action = positionals[1];
  if (action === "forget") return privacyForget(positionals, values);
  if ((action !== "check" && action !== "migrate") || positionals.length > 2) {
    throw new UsageError(`unknown command "${positionals.join(" ")}"`);
  }
  if (values.app === undefined || values.app === "") throw new UsageError("missing --app");
  const batch = values["batch-size"];
  if (batch !== undefined && !/^[1-9][0-9]{0,4}$/.test(batch)) throw new UsageError(`--batch-size must be an integer >= 1, got "${batch}"`);
  const out = await runPrivacyCommand({
    action,
    app: values.app,
    ...(values["dry-run"] === true ? { dryRun: true } : {}),
    ...(batch === undefined ? {} : { batchSize: Number(batch) }),
  });
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  return 0;
}

async function privacyForget(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length !== 3) throw new UsageError("privacy forget takes one subject: mneme privacy forget --app <module> <subject>");
  if (values.app === undefined || values.app === "") throw new UsageError("missing --app");
  if (values["dry-run"] === true || values["batch-size"] !== undefined)
    throw new UsageError("privacy forget takes no --dry-run or --batch-size");
  const subject = positionals[2]!;
  if (subject === "") throw new UsageError("the subject must not be empty");
  const out = await runPrivacyCommand({ action: "forget", app: values.app, subject });
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  return 0;
}

/** A positive integer option below 100,000 (a page size, a wait in ms), or undefined when absent. */
function countOption(values: Values, name: "batch-size" | "settle-ms", min: number): number | undefined {
  const text = values[name];
  if (text === undefined) return undefined;
  if (!/^[0-9]{1,5}$/.test(text) || Number(text) < min) throw new UsageError(`--${name} must be an integer >= ${min}, got "${text}"`);
  return Number(text);
}

async function upgradeCommand(positionals: readonly string[], values: Values): Promise<number> {
  const action = positionals[1];
  if ((action !== "status" && action !== "finish") || positionals.length > 2) {
    throw new UsageError(`unknown command "${positionals.join(" ")}"`);
  }
  if (values.app === undefined || values.app === "") throw new UsageError("missing --app");
  const settleMs = countOption(values, "settle-ms", 0);
  const batchSize = countOption(values, "batch-size", 1);
  const out = await runUpgradeCommand({
    action,
    app: values.app,
    ...(settleMs === undefined ? {} : { settleMs }),
    ...(batchSize === undefined ? {} : { batchSize }),
  });
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  return 0;
}

async function storeRetention(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length > 2) throw new UsageError(`unexpected argument "${positionals[2]}"`);
  if (values.app === undefined || values.app === "") throw new UsageError("missing --app");
  const batchSize = countOption(values, "batch-size", 1);
  if (batchSize !== undefined && batchSize > 10_000) throw new UsageError(`--batch-size must be at most 10000, got ${batchSize}`);
  const report = await runStoreRetention({
    app: values.app,
    ...(values["dry-run"] === true ? { dryRun: true } : {}),
    ...(batchSize === undefined ? {} : { batchSize }),
  });
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  return 0;
}

async function seedCommand(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length > 1) throw new UsageError(`unexpected argument "${positionals[1]}"`);
  const missing = (["app", "file"] as const).filter((k) => values[k] === undefined || values[k] === "");
  if (missing.length > 0) throw new UsageError(`missing ${missing.map((k) => `--${k}`).join(", ")}`);
  const report = await runSeedCommand({ app: values.app!, file: values.file! });
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  return 0;
}

/** mneme openapi / mneme client: the app's OpenAPI document, or its typed client. */
async function documentCommand(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length > 1) throw new UsageError(`unexpected argument "${positionals[1]}"`);
  if (values.app === undefined || values.app === "") throw new UsageError("missing --app");
  if (values.out === "") throw new UsageError("--out must name a file");
  if (positionals[0] === "openapi") {
    await runOpenApiCommand({ app: values.app, ...(values.out === undefined ? {} : { out: values.out }) }, process.stdout);
    return 0;
  }
  if (values.out === undefined) throw new UsageError("missing --out");
  await runClientCommand({ app: values.app, out: values.out }, process.stdout);
  return 0;
}

async function schemaBuild(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length > 2) {
    throw new UsageError(`unexpected argument "${positionals[2]}" (quote the --path glob so the shell does not expand it)`);
  }
  const missing = (["tsconfig", "path", "out"] as const).filter((k) => values[k] === undefined || values[k] === "");
  if (missing.length > 0) throw new UsageError(`missing ${missing.map((k) => `--${k}`).join(", ")}`);

  const types = [values.types, values.type]
    .filter((v) => v !== undefined)
    .flatMap((v) => v.split(","))
    .map((n) => n.trim());
  if (types.some((n) => n === "")) throw new UsageError("--types needs comma-separated type names, none empty");

  const started = performance.now();
  const { doc, report } = await buildSchemasWithReport({
    tsconfig: values.tsconfig!,
    path: values.path!,
    ...(types.length > 0 ? { types } : {}),
    ...(values["all-exports"] === true ? { allExports: true } : {}),
  });
  writeSchemasFile(values.out!, doc);
  const names = Object.keys(doc.$defs);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  process.stdout.write(`mneme: wrote ${plural(names.length, "schema")} to ${values.out} in ${seconds} s: ${firstNames(names)}\n`);
  if (report.selection === "messages") {
    process.stdout.write(
      `mneme: roots: the payload types of ${plural(report.messages, "message declaration") + " (.command, .query, .event)"}\n`,
    );
    if (report.unnamed.length > 0) {
      process.stdout.write(
        `mneme: no schema for ${plural(report.unnamed.length, "inline or library type argument")}: ${firstNames(report.unnamed)}\n`,
      );
    }
  }
  if (report.skipped.length > 0) {
    const why =
      report.selection === "messages" ? "that no command, query or event uses" : "not selected (classes and functions are never emitted)";
    process.stdout.write(`mneme: skipped ${plural(report.skipped.length, "export")} ${why}: ${firstNames(report.skipped)}\n`);
  }
  return 0;
}

function storeCopy(
  positionals: readonly string[],
  values: { from?: string | undefined; to?: string | undefined; resume?: boolean | undefined; "batch-size"?: string | undefined },
): Promise<number> {
  if (positionals[1] !== "copy" || positionals.length > 2) throw new UsageError(`unknown command "${positionals.join(" ")}"`);
  const missing = (["from", "to"] as const).filter((k) => values[k] === undefined || values[k] === "");
  if (missing.length > 0) throw new UsageError(`missing ${missing.map((k) => `--${k}`).join(", ")}`);
  const batch = values["batch-size"];
  if (batch !== undefined && !/^[1-9][0-9]{0,4}$/.test(batch)) throw new UsageError(`--batch-size must be an integer >= 1, got "${batch}"`);
  return runStoreCopy(
    { from: values.from!, to: values.to!, resume: values.resume === true, ...(batch === undefined ? {} : { pageSize: Number(batch) }) },
    process.stdout,
    process.stderr,
  );
}

function storeVerify(
  positionals: readonly string[],
  values: { store?: string | undefined; "batch-size"?: string | undefined; "archive-dir"?: string | undefined },
): Promise<number> {
  if (positionals.length > 2) throw new UsageError(`unknown command "${positionals.join(" ")}"`);
  if (values.store === undefined || values.store === "") throw new UsageError("missing --store");
  const batch = values["batch-size"];
  if (batch !== undefined && !/^[1-9][0-9]{0,4}$/.test(batch)) throw new UsageError(`--batch-size must be an integer >= 1, got "${batch}"`);
  const archiveDir = values["archive-dir"];
  return runStoreVerify(
    {
      store: values.store,
      ...(batch === undefined ? {} : { pageSize: Number(batch) }),
      ...(archiveDir === undefined ? {} : { archiveDirectory: archiveDir }),
    },
    process.stdout,
    process.stderr,
  );
}

function storeArchive(
  positionals: readonly string[],
  values: {
    store?: string | undefined;
    before?: string | undefined;
    to?: string | undefined;
    from?: string | undefined;
    restore?: boolean | undefined;
    "segment-events"?: string | undefined;
  },
): Promise<number> {
  if (positionals.length > 2) throw new UsageError(`unknown command "${positionals.join(" ")}"`);
  if (values.store === undefined || values.store === "") throw new UsageError("missing --store");
  const restore = values.restore === true;
  if (restore) {
    if (values.before !== undefined || values.to !== undefined) throw new UsageError("--restore takes --store and --from only");
  } else {
    const missing = (["before", "to"] as const).filter((k) => values[k] === undefined || values[k] === "");
    if (missing.length > 0) throw new UsageError(`missing ${missing.map((k) => `--${k}`).join(", ")}`);
    if (parseBefore(values.before!) === undefined)
      throw new UsageError(`--before must be a position or an ISO date, got "${values.before!}"`);
    if (values.from !== undefined) throw new UsageError("--from goes with --restore");
  }
  const seg = values["segment-events"];
  if (seg !== undefined && !/^[1-9][0-9]{0,6}$/.test(seg)) throw new UsageError(`--segment-events must be an integer >= 1, got "${seg}"`);
  return runStoreArchive(
    {
      store: values.store,
      restore,
      ...(values.before === undefined ? {} : { before: values.before }),
      ...(values.to === undefined ? {} : { to: values.to }),
      ...(values.from === undefined ? {} : { from: values.from }),
      ...(seg === undefined ? {} : { segmentEvents: Number(seg) }),
    },
    process.stdout,
    process.stderr,
  );
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/** The first names of a list, then "..." when there are more. */
function firstNames(names: readonly string[], max = 12): string {
  return names.length <= max ? names.join(", ") : `${names.slice(0, max).join(", ")}, ...`;
}

try {
  process.exitCode = await run(process.argv.slice(2));
} catch (e) {
  if (e instanceof UsageError) {
    process.stderr.write(`mneme: ${e.message}\n\n${USAGE}`);
    process.exitCode = 2;
  } else {
    process.stderr.write(`mneme: error: ${errorMessage(e)}\n`);
    process.exitCode = 1;
  }
}
