/**
 * Claims of idempotent dispatch: of concurrent duplicates of one commandUuid,
 * exactly one handler runs, on every backend and across instances (two
 * facades on one SQLite file or one Postgres schema), whether or not the
 * command appends events; the others get its outcome with `replayed: true`.
 * A duplicate waits for a command in progress up to a bound, then gets
 * CONFLICT (in progress); a claim of a killed instance (its process gone, its
 * Postgres session ended) is taken over at once and a retry runs the command.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createFacade, type DispatchResult, type Facade, type FacadeOptions } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { isCommandInProgress } from "../../src/model/errors.js";
import { Account, Charge, Claims, hooks, Notify, runs } from "../support/claims-domain.js";
import { holdAndKill } from "../support/hold-and-kill.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { rejection } from "../support/rejections.js";
import { alice, sharedPlaces } from "../support/shared-places.js";

const places = sharedPlaces("claims");

afterEach(() => {
  hooks.beforeEffect = () => undefined;
});

/** A gate a handler waits on until the test opens it. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

describe.each(places)("claims on %s", (_name, placeOf) => {
  async function facades(n: number, extra: Partial<FacadeOptions>[] = []) {
    const stores = placeOf();
    const fs: Facade[] = [];
    for (let i = 0; i < n; i++) {
      const f = createFacade({ appName: `claims-${i}`, ...stores(), ...extra[i] }).registerDomain(Claims);
      await f.start();
      fs.push(f);
    }
    return {
      fs,
      stop: async () => {
        for (const f of fs.reverse()) await f.stop();
      },
    };
  }

  it.each([
    ["a command with events (Charge)", "Charge"],
    ["a command without events (Notify)", "Notify"],
  ] as const)("runs the handler of %s once for concurrent duplicates across two facades", async (_what, command) => {
    const { fs, stop } = await facades(2);
    const before = runs[command];
    // The first handler to run holds its command in progress a while: every duplicate meets it running.
    hooks.beforeEffect = () => new Promise((r) => setTimeout(r, 150));
    try {
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i): Promise<DispatchResult> => {
          const f = fs[i % 2]!;
          const o = { reqCtx: alice, commandUuid: `claim-${command}` };
          return command === "Charge"
            ? f.dispatch(Charge, { accountUuid: "A", amount: 4 }, o)
            : f.dispatch(Notify, { to: "a@example.com" }, o);
        }),
      );
      expect(runs[command] - before).toBe(1);
      expect(results.filter((r) => r.replayed !== true)).toHaveLength(1);
      const outcomes = new Set(results.map((r) => r.events.map((e) => `${e.eventUuid}@${e.position}`).join()));
      expect(outcomes.size).toBe(1);
      expect(results[0]!.events).toHaveLength(command === "Charge" ? 1 : 0);
      if (command === "Charge") expect((await fs[1]!.loadAggregate(Account, "A")).state.total).toBe(4);
      const rec = await fs[0]!.commandStore.get(`claim-${command}`);
      expect(rec?.status).toBe("succeeded");
      // Nothing was logged: no second record was attempted.
      const errors = (await fs[0]!.logStore.list({ limit: 100 })).items.filter((e) => e.level === "error");
      expect(errors).toEqual([]);
      expect((await fs[0]!.commandStore.list()).items.map((r) => r.commandUuid)).toEqual([`claim-${command}`]);
    } finally {
      await stop();
    }
  });

  it("gives CONFLICT (in progress) to a duplicate that waited past its bound, and the outcome once known", async () => {
    const { fs, stop } = await facades(2, [{}, { idempotency: { waitMs: 150 } }]);
    const [a, b] = fs as [Facade, Facade];
    const held = gate();
    const running = gate();
    hooks.beforeEffect = () => {
      running.open();
      return held.wait;
    };
    try {
      const first = a.dispatch(Notify, { to: "b@example.com" }, { reqCtx: alice, commandUuid: "claim-slow" });
      await running.wait;
      const before = runs.Notify;
      const late = await rejection(b.dispatch(Notify, { to: "b@example.com" }, { reqCtx: alice, commandUuid: "claim-slow" }));
      expect([late.code, late.message]).toEqual(["CONFLICT", expect.stringMatching(/claim-slow is in progress/)]);
      expect(runs.Notify).toBe(before);
      // The refused duplicate wrote nothing: no failed record replaced the claim.
      expect(await b.commandStore.get("claim-slow")).toBeUndefined();
      held.open();
      expect((await first).replayed).toBeUndefined();
      const again = await b.dispatch(Notify, { to: "b@example.com" }, { reqCtx: alice, commandUuid: "claim-slow" });
      expect(again.replayed).toBe(true);
      expect(runs.Notify).toBe(before);
    } finally {
      held.open();
      await stop();
    }
  });

  it("releases the claim of a failed command: a retry runs at once, and a failed record is replaced", async () => {
    const { fs, stop } = await facades(2, [{}, { idempotency: { waitMs: 0 } }]);
    const [a, b] = fs as [Facade, Facade];
    hooks.beforeEffect = () => {
      throw new Error("mail server down");
    };
    try {
      const failed = await rejection(a.dispatch(Notify, { to: "c@example.com" }, { reqCtx: alice, commandUuid: "claim-fail" }));
      expect(failed.code).toBe("HANDLER_FAILED");
      expect((await a.commandStore.get("claim-fail"))?.status).toBe("failed");
      hooks.beforeEffect = () => undefined;
      const before = runs.Notify;
      // waitMs 0: a claim left behind would be CONFLICT here.
      const retried = await b.dispatch(Notify, { to: "c@example.com" }, { reqCtx: alice, commandUuid: "claim-fail" });
      expect(retried.replayed).toBeUndefined();
      expect(runs.Notify).toBe(before + 1);
      expect((await a.commandStore.get("claim-fail"))?.status).toBe("succeeded");
    } finally {
      await stop();
    }
  });
});

describe("a claim of a killed instance", () => {
  const dir = mkdtempSync(join(tmpdir(), "mneme-claims-kill-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const pg = postgresScratch("mneme_claims_kill");
  // Far longer than the test: the claim must be taken over because its holder died, not because it expired.
  const LEASE_MS = 600_000;

  /** How many claim rows `commandUuid` has (1: the dead instance's claim is there). */
  async function claimRows(backend: "sqlite" | "postgres", filename: string, table: string, commandUuid: string): Promise<number> {
    if (backend === "postgres") return (await pg.pool.query(`SELECT 1 FROM ${table} WHERE command_uuid = $1`, [commandUuid])).rowCount ?? 0;
    const db = new Database(filename, { readonly: true });
    try {
      return db.prepare(`SELECT 1 FROM ${table} WHERE command_uuid = ?`).all(commandUuid).length;
    } finally {
      db.close();
    }
  }

  const holder = fileURLToPath(new URL("../support/claim-holder-process.ts", import.meta.url));

  it.each([
    ["sqlite", "Charge"],
    ["sqlite", "Notify"],
    ["postgres", "Charge"],
    ["postgres", "Notify"],
  ] as const)(
    "on %s (%s): the dead instance's claim is taken over at once, long before its lease ends, and the command runs once",
    async (backend, command) => {
      const commandUuid = `killed-${backend}-${command}`;
      const filename = join(dir, `${commandUuid}.db`);
      const schema = pg.newSchema();
      const stores = backend === "sqlite" ? createSqliteBackends({ filename }) : createPostgresBackends({ pool: pg.pool, schema });
      // A claim taken as live is CONFLICT (in progress) after 3 s, the lease runs 10 minutes: only a takeover passes.
      // (Not 0: Postgres ends the killed process's session a moment after the kill, when it reads the closed socket.)
      const f = createFacade({ appName: "claims-retry", ...stores, idempotency: { waitMs: 3000 } }).registerDomain(Claims);
      const reqCtx = { senderAccountUuid: "acc-k", senderSessionUuid: "s-k", senderIdentityUuid: "i-k", senderTenantUuid: "tenant-k" };
      const send = () =>
        command === "Charge"
          ? f.dispatch(Charge, { accountUuid: "K", amount: 9 }, { reqCtx, commandUuid })
          : f.dispatch(Notify, { to: "k@example.com" }, { reqCtx, commandUuid });
      await holdAndKill(
        holder,
        [backend, backend === "sqlite" ? filename : DATABASE_URL, schema, command, commandUuid, String(LEASE_MS)],
        async () => {
          await f.start();
          // While the holder lives, its claim holds: in progress, no attempt taken from it.
          const live = await rejection(send());
          expect(isCommandInProgress(live), live.message).toBe(true);
        },
      );
      try {
        // The dead instance's claim is still there, its lease running for ten minutes.
        const claims = backend === "sqlite" ? "mneme_command_claims" : `${schema}.command_claims`;
        expect(await claimRows(backend, filename, claims, commandUuid)).toBe(1);
        const before = runs[command];
        const res = await send();
        expect(res.replayed).toBeUndefined();
        expect(runs[command]).toBe(before + 1);
        expect(res.events).toHaveLength(command === "Charge" ? 1 : 0);
        expect((await f.commandStore.get(commandUuid))?.status).toBe("succeeded");
        expect((await send()).replayed).toBe(true);
        expect(runs[command]).toBe(before + 1);
      } finally {
        await f.stop();
      }
    },
    120_000,
  );
});
