#!/usr/bin/env node
/**
 * Makes the upgrade fixtures of test/cli/upgrade-fixtures.int.test.ts: a SQLite
 * file and a plain-SQL Postgres dump written by each earlier release, with
 * the manifest of what they hold (test/fixtures/upgrade/<release>.*).
 *
 * For each release it takes the release's src/ from git history
 * (`git archive <commit> src`) into a scratch folder (node_modules linked to
 * this repository's), runs test/fixtures/upgrade/write-fixture.ts with tsx
 * against that code, once on a new SQLite file and once in a new Postgres
 * schema, and dumps the schema with pg_dump (plain SQL, no owner, no
 * privileges). The dump keeps the schema name `upgrade_fixture_<release>`;
 * the test loads it into a schema of its own by renaming it.
 *
 * Rerun (from the repository root, Postgres reachable at DATABASE_URL,
 * default postgres://postgres@127.0.0.1:5432/test; pg_dump on the PATH):
 *   node scripts/make-upgrade-fixtures.mjs            # both releases
 *   node scripts/make-upgrade-fixtures.mjs r01        # one
 * The fixtures change on every run (random ids); commit them with the tests.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = join(ROOT, "test", "fixtures", "upgrade");
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

/** The earlier releases: the first (0.1.0) and the second. */
const RELEASES = [
  { name: "r01", commit: "44da8f1", label: "0.1.0 (the first release)" },
  { name: "r02", commit: "8256c9f", label: "the second release" },
];

const wanted = process.argv.slice(2);
const scratch = mkdtempSync(join(tmpdir(), "mneme-upgrade-fixtures-"));
try {
  for (const r of RELEASES.filter((x) => wanted.length === 0 || wanted.includes(x.name))) {
    const dir = join(scratch, r.name);
    mkdirSync(dir, { recursive: true });
    const archive = execFileSync("git", ["-C", ROOT, "archive", r.commit, "src", "package.json"], { maxBuffer: 256 << 20 });
    execFileSync("tar", ["-x", "-C", dir], { input: archive });
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
    // The writer runs from inside the scratch folder, so the release's own imports resolve there.
    const writer = join(dir, "fixture");
    mkdirSync(writer);
    for (const f of ["write-fixture.ts", "crm-app.ts"]) writeFileSync(join(writer, f), readFileSync(join(OUT, f)));
    const tsx = join(ROOT, "node_modules", ".bin", "tsx");
    const sqliteFile = join(OUT, `${r.name}.sqlite`);
    for (const f of [sqliteFile, `${sqliteFile}-wal`, `${sqliteFile}-shm`]) if (existsSync(f)) rmSync(f);
    const src = join(dir, "src");
    const run = (backend, target, manifest) =>
      execFileSync(tsx, [join(writer, "write-fixture.ts"), src, backend, target, manifest], { cwd: dir, stdio: "inherit" });
    run("sqlite", sqliteFile, join(OUT, `${r.name}.sqlite.json`));
    // One file, no write-ahead log left beside it.
    execFileSync("sqlite3", [sqliteFile, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE; VACUUM;"]);

    const schema = `upgrade_fixture_${r.name}`;
    execFileSync("psql", [DATABASE_URL, "-q", "-c", `DROP SCHEMA IF EXISTS ${schema} CASCADE`]);
    run("postgres", `${DATABASE_URL}#${schema}`, join(OUT, `${r.name}.sql.json`));
    const dump = execFileSync("pg_dump", [DATABASE_URL, "--schema", schema, "--no-owner", "--no-privileges", "--format", "plain"], {
      maxBuffer: 64 << 20,
    }).toString();
    writeFileSync(join(OUT, `${r.name}.sql`), `-- Written by ${r.label}, commit ${r.commit}: scripts/make-upgrade-fixtures.mjs\n${dump}`);
    execFileSync("psql", [DATABASE_URL, "-q", "-c", `DROP SCHEMA ${schema} CASCADE`]);
    console.log(`${r.name}: ${r.label} written`);
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
