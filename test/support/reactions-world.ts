/**
 * What the reactions tests share: the three backends (memory, a SQLite file,
 * a Postgres schema of its own), a fake clock, a payment provider that
 * records its calls, and `settle`, which waits until a chain of reactions has
 * nothing left to do that is due.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, afterEach } from "vitest";
import { createFacade, type Facade, type FacadeOptions, newUuid } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import type { OutboxHandler } from "mneme/reactions";
import type { PaymentProvider } from "../../examples/orders/fulfilment.js";

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export type BackendName = "memory" | "sqlite" | "postgres";
export const BACKENDS: readonly BackendName[] = ["memory", "sqlite", "postgres"];

/** A clock that moves only when told to (ms since the epoch). */
export class FakeClock {
  constructor(public ms = Date.now()) {}
  readonly now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** A provider that charges once per idempotency key, and records every call (key included). */
export class RecordingProvider implements PaymentProvider {
  readonly calls: { orderUuid: string; amount: number; idempotencyKey: string }[] = [];
  readonly charges = new Map<string, string>();
  /** Calls still to fail before the provider answers. */
  failNext = 0;
  charge(request: { orderUuid: string; amount: number; idempotencyKey: string }): Promise<{ chargeId: string }> {
    this.calls.push(request);
    if (this.failNext > 0) {
      this.failNext--;
      return Promise.reject(new Error("payment provider unavailable"));
    }
    let id = this.charges.get(request.idempotencyKey);
    if (id === undefined) {
      id = `ch_${this.charges.size + 1}`;
      this.charges.set(request.idempotencyKey, id);
    }
    return Promise.resolve({ chargeId: id });
  }
}

/**
 * Makes facades on one backend kind; a SQLite file or a Postgres schema is
 * shared by the facades of one `world()` (instances of one app). Stops them
 * after each test and drops what it made after the file.
 */
export function reactionWorlds(): (backend: BackendName) => { facade: (appName?: string, extra?: Partial<FacadeOptions>) => Facade } {
  const dir = mkdtempSync(join(tmpdir(), "mneme-reactions-"));
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 8 });
  const schemas: string[] = [];
  const facades: Facade[] = [];
  afterEach(async () => {
    for (const f of facades.splice(0).reverse()) await f.stop().catch(() => undefined);
  });
  afterAll(async () => {
    for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
    await pool.end();
    rmSync(dir, { recursive: true, force: true });
  });
  return (backend) => {
    const filename = join(dir, `${newUuid()}.db`);
    const schema = `reactions_${newUuid().replace(/-/g, "").slice(-12)}`;
    if (backend === "postgres") schemas.push(schema);
    return {
      facade: (appName = "shop", extra = {}) => {
        const backends =
          backend === "memory"
            ? {}
            : backend === "sqlite"
              ? createSqliteBackends({ filename })
              : createPostgresBackends({ connectionString: DATABASE_URL, schema, poolSize: 4 });
        const f = createFacade({ appName, ...backends, ...extra });
        facades.push(f);
        return f;
      },
    };
  };
}

/**
 * Waits until every handler has passed the head and has no entry that is due
 * (delivering them meanwhile), so the chain rests. Gives up after `rounds`.
 */
export async function settle(facade: Facade, handlers: readonly OutboxHandler[], now: () => number, rounds = 200): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    const head = await facade.eventRepository.headPosition();
    for (const h of handlers) {
      for (let i = 0; h.lastPosition < head; i++) {
        if (i > 2000) throw new Error(`${h.name} did not reach position ${head} (at ${h.lastPosition}, ${h.state})`);
        await new Promise((r) => setTimeout(r, 5));
      }
      await h.outbox.drain();
    }
    let due = 0;
    for (const h of handlers) due += (await h.outbox.list({ status: "pending" })).filter((e) => e.dueAt <= now()).length;
    if (due === 0 && (await facade.eventRepository.headPosition()) === head) return;
  }
  throw new Error("the reactions did not settle");
}
