/**
 * What declaring a command's personal data costs on dispatch: a command with
 * two personal fields (sealed with AES-256-GCM into its CommandStore record,
 * 100 subjects whose keys exist: the steady state) against the same command
 * type without `personalData`, each appending one event without personal data,
 * on one SQLite file and in memory, in interleaved rounds of the same run. The
 * ratio is commands/s with sealing over without.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFacade, type Facade } from "../src/app/facade.js";
import { defineDomain } from "../src/model/domain.js";
import type { DomainInstall } from "../src/model/domain-install.js";
import { createSqliteBackends } from "../src/sqlite/sqlite-backends.js";
import { BENCH_REQ_CTX as reqCtx, type Bench, duel } from "./harness.js";

interface Lend {
  bookUuid: string;
  memberUuid: string;
  memberEmail: string;
  memberName: string;
}

function library() {
  const D = defineDomain("Library");
  const Lent = D.event<{ bookUuid: string; memberUuid: string }>("BookLent");
  const Sealed = D.command<Lend>("LendSealed", {
    personalData: { subject: (p) => p.memberUuid, fields: ["memberEmail", "memberName"] },
  });
  const Plain = D.command<Lend>("LendPlain");
  const install: DomainInstall = (d) => {
    for (const c of [Sealed, Plain])
      d.handleCommand(c, (_ctx, _e, p) => [Lent.create(p.bookUuid, { bookUuid: p.bookUuid, memberUuid: p.memberUuid })]);
  };
  return { D, Sealed, Plain, install };
}

const lend = (i: number): Lend => ({
  bookUuid: `0190a7a2-0000-7000-8300-${String(i).padStart(12, "0")}`,
  memberUuid: `member-${i % 100}`,
  memberEmail: `member${i % 100}@example.org`,
  memberName: `Member Number${i % 100}`,
});

async function measure(b: Bench, where: string, f: Facade, lib: ReturnType<typeof library>): Promise<void> {
  await f.start();
  // The 100 subjects' keys, made once: the rounds measure the steady state.
  for (let i = 0; i < 100; i++) await f.dispatch(lib.Sealed, lend(i), { reqCtx });
  const perRound = b.quick ? 500 : 2_000;
  const rounds = 6;
  let n = 1_000;
  const run = (type: typeof lib.Sealed) => async (): Promise<void> => {
    for (let i = 0; i < perRound; i++) await f.dispatch(type, lend(n++), { reqCtx });
  };
  await duel(
    b,
    "privacy-commands",
    `${where}: dispatch, command with 2 personal fields sealed in its record`,
    perRound,
    rounds,
    run(lib.Sealed),
    [{ name: "baseline (same command, no personalData)", run: run(lib.Plain) }],
    "commands/s",
  );
  await f.stop();
}

export default async function privacyCommandsBench(b: Bench): Promise<void> {
  const memory = library();
  await measure(b, "memory", createFacade({ appName: "bench-privacy-commands" }).registerDomain(memory.D, memory.install), memory);
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-privacy-commands-"));
  try {
    const sqlite = library();
    const f = createFacade({ appName: "bench-privacy-commands", ...createSqliteBackends({ filename: join(dir, "commands.db") }) });
    await measure(b, "sqlite", f.registerDomain(sqlite.D, sqlite.install), sqlite);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
