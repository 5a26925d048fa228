/**
 * The install footprint: ts-json-schema-generator (and with it the TypeScript
 * compiler) is an optional peer dependency that only `mneme schema build`
 * loads, on demand. Checked in process (the loader, package.json, the sources)
 * and on a real production install of the packed package, where the generator
 * is absent: `import "mneme"` and the CLI's other commands work, and
 * `schema build` names the package and its install command.
 */
import { cpSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GENERATOR_PACKAGE, GENERATOR_RANGE, installCommand, loadGenerator } from "../../src/cli/load-generator.js";
import { isMnemeError, MnemeError } from "../../src/model/errors.js";
import { runProcess } from "../support/run-process.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), "mneme-package-install-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error("expected a rejection");
}

describe("loadGenerator", () => {
  it("returns createGenerator when the generator is installed (a dev dependency here)", async () => {
    expect(typeof (await loadGenerator())).toBe("function");
  });

  it("a package that is not installed is a MnemeError naming it and the install command", async () => {
    const e = await rejection(loadGenerator("mneme-test-no-such-package"));
    expect(isMnemeError(e, "INVALID_REQUEST")).toBe(true);
    const message = (e as MnemeError).message;
    expect(message).toContain("mneme schema build needs mneme-test-no-such-package, which is not installed");
    expect(message).toContain("npm install --save-dev mneme-test-no-such-package");
    expect(message).not.toContain("\n");
  });

  it("a package that is installed but whose own import is missing is told apart", async () => {
    const dir = join(tmp, "broken");
    mkdirSync(dir, { recursive: true });
    const file = join(dir, "broken-generator.mjs");
    writeFileSync(file, 'export { createGenerator } from "mneme-test-no-such-dependency";\n');
    const e = await rejection(loadGenerator(file));
    expect(isMnemeError(e, "INVALID_REQUEST")).toBe(true);
    expect((e as MnemeError).message).toContain(`mneme schema build cannot load ${file}:`);
    expect((e as MnemeError).message).toContain("mneme-test-no-such-dependency");
  });

  it("a module without createGenerator is refused", async () => {
    const file = join(tmp, "no-create.mjs");
    writeFileSync(file, "export const other = 1;\n");
    const e = await rejection(loadGenerator(file));
    expect(isMnemeError(e, "INVALID_REQUEST")).toBe(true);
    expect((e as MnemeError).message).toContain("has no createGenerator export");
  });

  it("the install command names the supported range", () => {
    expect(installCommand()).toBe("npm install --save-dev ts-json-schema-generator@~2.4.0");
  });
});

describe("package.json and sources", () => {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Record<string, Record<string, unknown> | undefined>;

  it("the generator is an optional peer and a dev dependency of the range the error names, never a dependency", () => {
    expect(pkg.dependencies?.[GENERATOR_PACKAGE]).toBeUndefined();
    expect(pkg.dependencies?.typescript).toBeUndefined();
    expect(pkg.peerDependencies?.[GENERATOR_PACKAGE]).toBe(GENERATOR_RANGE);
    expect(pkg.peerDependenciesMeta?.[GENERATOR_PACKAGE]).toEqual({ optional: true });
    expect(pkg.devDependencies?.[GENERATOR_PACKAGE]).toBe(GENERATOR_RANGE);
  });

  it("no source file imports the generator or typescript at run time, except load-generator.ts dynamically", () => {
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const full = join(dir, e.name);
        if (e.isDirectory()) walk(full);
        else if (e.name.endsWith(".ts")) {
          const text = readFileSync(full, "utf8");
          // Static imports and re-exports that stay in the emitted JavaScript (not `import type`).
          const value = /^\s*(?:import|export)\s+(?!type\b)[^;]*?from\s+["'](ts-json-schema-generator|typescript)["']/m;
          const bare = /^\s*import\s+["'](ts-json-schema-generator|typescript)["']/m;
          const dynamic = /import\(\s*["'](ts-json-schema-generator|typescript)["']\s*\)/;
          if (
            value.test(text) ||
            bare.test(text) ||
            dynamic.test(text) ||
            /require\(\s*["'](ts-json-schema-generator|typescript)["']/.test(text)
          ) {
            offenders.push(full.slice(root.length));
          }
        }
      }
    };
    walk(join(root, "src"));
    expect(offenders).toEqual([]);
    expect(readFileSync(join(root, "src/cli/load-generator.ts"), "utf8")).toContain("await import(moduleName)");
  });
});

/** Disk usage of a tree as `du` counts it (allocated blocks), in bytes. */
function diskUsage(path: string): number {
  const st = lstatSync(path);
  let total = st.blocks * 512;
  if (st.isDirectory()) for (const name of readdirSync(path)) total += diskUsage(join(path, name));
  return total;
}

/** Installed packages: every node_modules/<name> and node_modules/@scope/<name> below `dir`. */
function packagesBelow(dir: string, out: string[] = []): string[] {
  const nm = join(dir, "node_modules");
  let names: string[];
  try {
    names = readdirSync(nm);
  } catch {
    return out;
  }
  for (const name of names) {
    if (name.startsWith(".")) continue;
    const dirs = name.startsWith("@") ? readdirSync(join(nm, name)).map((n) => join(name, n)) : [name];
    for (const d of dirs) {
      out.push(d);
      packagesBelow(join(nm, d), out);
    }
  }
  return out;
}

describe("production install of the packed package (npm install --omit=dev)", () => {
  const pkgDir = join(tmp, "pkg");
  const appDir = join(tmp, "app");
  const bin = join(appDir, "node_modules", ".bin", "mneme");

  beforeAll(async () => {
    // Build into a copy of the package (not the working tree's dist/), pack it, install it.
    mkdirSync(pkgDir, { recursive: true });
    const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
    const build = await runProcess(process.execPath, [tsc, "-p", "tsconfig.build.json", "--outDir", join(pkgDir, "dist")], root, 180_000);
    expect(build.stdout + build.stderr, "build").toBe("");
    // What `npm run build` adds after tsc: the dashboard's static assets.
    const assets = await runProcess(
      process.execPath,
      [join(root, "scripts", "build-dashboard.mjs"), "--out", join(pkgDir, "dist", "dashboard")],
      root,
    );
    expect(assets.code, assets.stderr).toBe(0);
    for (const f of ["package.json", "README.md", "CHANGELOG.md"]) cpSync(join(root, f), join(pkgDir, f));
    const pack = await runProcess("npm", ["pack", "--ignore-scripts", "--pack-destination", tmp], pkgDir);
    expect(pack.code, pack.stderr).toBe(0);
    const tarball = join(tmp, pack.stdout.trim().split("\n").pop()!);
    mkdirSync(appDir, { recursive: true });
    writeFileSync(join(appDir, "package.json"), `${JSON.stringify({ name: "app", version: "1.0.0", private: true, type: "module" })}\n`);
    const install = await runProcess(
      "npm",
      ["install", "--omit=dev", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", tarball],
      appDir,
      180_000,
    );
    expect(install.code, install.stderr).toBe(0);
  }, 300_000);

  // 9 MB on disk (allocated blocks): mneme's own dist (about 740 small files, the dashboard included) and ajv make most of it.
  it("brings neither typescript nor the generator, a handful of packages, under 10 MB", () => {
    const packages = packagesBelow(appDir);
    expect(packages).toContain("mneme");
    expect(packages).not.toContain("typescript");
    expect(packages).not.toContain(GENERATOR_PACKAGE);
    expect(packages.length).toBeLessThanOrEqual(12);
    // 8.3 MB with 0.3.0 (its dist without maps is about 2.7 MB; the rest is ajv, uuid, eventemitter3 and tslib);
    // 9.2 MB once archive, retention, live-query signals and the API viewer's route were added (Unreleased).
    expect(diskUsage(join(appDir, "node_modules"))).toBeLessThan(10 * 1024 * 1024);
    expect(readdirSync(join(appDir, "node_modules", "mneme", "dist", "dashboard"))).toContain("index.html");
  });

  it('import "mneme" and "mneme/http" work without the generator', async () => {
    const script = 'const m = await import("mneme"); await import("mneme/http"); console.log(typeof m.createFacade);';
    const r = await runProcess(process.execPath, ["--input-type=module", "-e", script], appDir);
    expect(r.stderr.trim()).toBe("");
    expect(r.stdout.trim()).toBe("function");
  });

  it("a facade starts and dispatches without @opentelemetry/api (an optional peer) installed", async () => {
    expect(packagesBelow(appDir)).not.toContain("@opentelemetry/api");
    const script = [
      'const { createFacade, defineDomain, anonymous } = await import("mneme");',
      'const D = defineDomain("Probe"); const Pinged = D.event("Pinged"); const Ping = D.command("Ping", { permission: anonymous });',
      'D.handleCommand(Ping, () => [Pinged.create("p1", {})]);',
      "const f = createFacade().registerDomain(D); await f.start();",
      "const r = await f.dispatch(Ping, {}); console.log(r.events.length); await f.stop();",
    ].join("\n");
    const r = await runProcess(process.execPath, ["--input-type=module", "-e", script], appDir);
    expect(r.stderr.trim()).toBe("");
    expect(r.stdout.trim()).toBe("1");
  });

  it("without the database drivers (optional peers), mneme/sqlite runs on node:sqlite, and a named missing driver (better-sqlite3, pg) names the package and its install command", async () => {
    const packages = packagesBelow(appDir);
    expect(packages).not.toContain("better-sqlite3");
    expect(packages).not.toContain("pg");
    const script = [
      'const { createSqliteBackends } = await import("mneme/sqlite");',
      'const { createPostgresBackends } = await import("mneme/postgres");',
      'const { isMnemeError } = await import("mneme");',
      // No driver named: node:sqlite, built into Node.js, with no package installed.
      "const b = createSqliteBackends({ filename: 'app.db' });",
      "const [e] = await b.eventRepository.append([{ domain: 'D', name: 'E', aggregateUuid: 'a', payload: { n: 1 } }]);",
      "console.log(b.readmodelStoreBackend.connection().driverName, e.position); await b.close();",
      "for (const make of [() => createSqliteBackends({ filename: 'app2.db', driver: 'better-sqlite3' }), () => createPostgresBackends({ connectionString: 'postgres://127.0.0.1/x' })]) {",
      "  try { make(); console.log('made'); } catch (e) { console.log(isMnemeError(e, 'INVALID_REQUEST'), e.message); }",
      "}",
    ].join("\n");
    const r = await runProcess(process.execPath, ["--disable-warning=ExperimentalWarning", "--input-type=module", "-e", script], appDir);
    expect(r.stderr.trim()).toBe("");
    const [noPackage, sqlite, postgres] = r.stdout.trim().split("\n");
    expect(noPackage).toBe("node:sqlite 1");
    expect(sqlite).toMatch(
      /^true mneme\/sqlite needs better-sqlite3, which is not installed: .*Install it: npm install better-sqlite3@\^13\. .*driver: "node:sqlite"/,
    );
    expect(postgres).toMatch(/^true mneme\/postgres needs pg, which is not installed: .*Install it: npm install pg@\^8$/);
  });

  it("without amqplib (an optional peer), mneme/amqp imports, and a publisher or consumer given a URL names the package and its install command", async () => {
    expect(packagesBelow(appDir)).not.toContain("amqplib");
    const script = [
      'const { AmqpPublisher, AmqpConsumer } = await import("mneme/amqp");',
      'const { createFacade, isMnemeError } = await import("mneme");',
      "const f = createFacade(); const base = { domain: 'D', connection: 'amqp://127.0.0.1' };",
      "for (const make of [() => new AmqpPublisher(f, { ...base, name: 'Out', exchange: 'x' }), () => new AmqpConsumer(f, { ...base, name: 'In', queue: 'q', toCommand: () => undefined })]) {",
      "  try { make(); console.log('made'); } catch (e) { console.log(isMnemeError(e, 'INVALID_REQUEST'), e.message); }",
      "}",
    ].join("\n");
    const r = await runProcess(process.execPath, ["--input-type=module", "-e", script], appDir);
    expect(r.stderr.trim()).toBe("");
    const lines = r.stdout.trim().split("\n");
    expect(lines).toHaveLength(2);
    for (const line of lines)
      expect(line).toMatch(/^true mneme\/amqp needs amqplib, which is not installed: .*Install it: npm install amqplib@\^2$/);
  });

  it("an app using mneme without kysely, pg or their types installed type-checks (skipLibCheck off: mneme's own typings checked too)", async () => {
    const packages = packagesBelow(appDir);
    for (const absent of ["kysely", "pg", "@types/pg", "better-sqlite3", "@types/better-sqlite3"]) expect(packages).not.toContain(absent);
    const dir = join(appDir, "typecheck");
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, "app.ts"),
      [
        'import { createFacade, defineDomain, on, SqlTableReadmodel } from "mneme";',
        'import { createSqliteBackends } from "mneme/sqlite";',
        'import { createMemoryBackends } from "mneme/memory";',
        'import { createHttpHandler } from "mneme/http";',
        'import { registerDefaults, accountRoutes } from "mneme/defaults";',
        'import type { EvolveStep } from "mneme/types";',
        'const Ticket = defineDomain("Ticket");',
        'const TicketOpened = Ticket.event<{ title: string }>("TicketOpened");',
        'export const TicketAggregate = Ticket.aggregate("Ticket", {',
        '  initialState: () => ({ open: false, title: "" }),',
        "  evolve: (o) => [o(TicketOpened, (s, p) => ({ ...s, open: true, title: p.title }))],",
        "});",
        "export const step: EvolveStep<{ n: number }, { title: string }> = on(TicketOpened, (s: { n: number }) => s);",
        'export const facade = createFacade({ appName: "t", ...(process.env.DB ? createSqliteBackends({ filename: process.env.DB }) : createMemoryBackends()) });',
        "facade.registerDomain(Ticket);",
        'export const ready = registerDefaults(facade, { admin: { email: "a@example.org", password: "a long password 1" } });',
        "export const handler = createHttpHandler(facade, { modules: [accountRoutes()] });",
        "export type Tables = SqlTableReadmodel;",
        "",
      ].join("\n"),
    );
    const tsconfig = {
      compilerOptions: {
        target: "ES2022",
        lib: ["ES2023", "DOM"],
        module: "nodenext",
        moduleResolution: "nodenext",
        strict: true,
        verbatimModuleSyntax: true,
        skipLibCheck: false,
        noEmit: true,
        // Only Node's own types, from this repository (the app under test has no @types at all).
        typeRoots: [join(root, "node_modules", "@types")],
        types: ["node"],
      },
      files: ["app.ts"],
    };
    writeFileSync(join(dir, "tsconfig.json"), `${JSON.stringify(tsconfig, null, 2)}\n`);
    writeFileSync(join(dir, "package.json"), `${JSON.stringify({ name: "typecheck", private: true, type: "module" })}\n`);
    const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
    const r = await runProcess(process.execPath, [tsc, "-p", "tsconfig.json"], dir, 120_000);
    expect(r.stdout + r.stderr).toBe("");
    expect(r.code).toBe(0);
  }, 150_000);

  it("the CLI's --help and --version work without the generator", async () => {
    const [help, version] = await Promise.all([runProcess(bin, ["--help"], appDir), runProcess(bin, ["--version"], appDir)]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("mneme schema build --tsconfig <file>");
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("`mneme schema build` asks for the generator by name: exit 1, the install command, no stack trace", async () => {
    writeFileSync(join(appDir, "tsconfig.json"), "{}\n");
    writeFileSync(join(appDir, "types.ts"), "export interface A { a: string }\n");
    const r = await runProcess(
      bin,
      ["schema", "build", "--tsconfig", "tsconfig.json", "--path", "types.ts", "--out", "schemas.json"],
      appDir,
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      "mneme: error: mneme schema build needs ts-json-schema-generator, which is not installed: it is an optional peer dependency of mneme, used at build time only. Install it as a dev dependency: npm install --save-dev ts-json-schema-generator@~2.4.0\n",
    );
    expect(r.stderr).not.toMatch(/^\s+at /m);
  });
});
