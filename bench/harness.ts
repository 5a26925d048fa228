/**
 * Tiny benchmark harness: every bench module exports `default async function (b: Bench)`.
 * Figures are printed as one table; ratios compare mneme with the raw driver
 * doing the same work in the same run.
 */
import type { NewEvent, RequestContext } from "../src/model/types.js";

export interface BenchRow {
  group: string;
  name: string;
  ops: number;
  seconds: number;
  unit: string;
  /** mneme's throughput divided by the baseline's (same run), when there is one. */
  ratio?: number;
  note?: string;
}

export class Bench {
  readonly rows: BenchRow[] = [];
  constructor(readonly quick: boolean) {}

  /** Runs fn once (it does `ops` operations) and records throughput. */
  async measure(group: string, name: string, ops: number, fn: () => Promise<void> | void, unit = "ops/s"): Promise<BenchRow> {
    const t0 = performance.now();
    await fn();
    const seconds = (performance.now() - t0) / 1000;
    const row: BenchRow = { group, name, ops, seconds, unit };
    this.rows.push(row);
    print(row);
    return row;
  }

  /** Records a throughput timed by the caller (e.g. summed over interleaved rounds). */
  record(group: string, name: string, ops: number, seconds: number, unit = "ops/s"): BenchRow {
    const row: BenchRow = { group, name, ops, seconds, unit };
    this.rows.push(row);
    print(row);
    return row;
  }

  /** Records a ratio of `row` against `baseline` (throughput / throughput). */
  compare(row: BenchRow, baseline: BenchRow): void {
    row.ratio = row.ops / row.seconds / (baseline.ops / baseline.seconds);
    console.log(`    -> ${row.name} / ${baseline.name} = ${row.ratio.toFixed(2)}x`);
  }

  /** Records a value that is not a throughput (e.g. ns per check, MB of heap). */
  value(group: string, name: string, value: number, unit: string, note?: string): void {
    const row: BenchRow = { group, name, ops: value, seconds: 1, unit, ...(note === undefined ? {} : { note }) };
    this.rows.push(row);
    console.log(`  ${group.padEnd(14)} ${name.padEnd(52)} ${fmt(value).padStart(14)} ${unit}${note ? `  (${note})` : ""}`);
  }
}

function fmt(n: number): string {
  return n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(2);
}

function print(r: BenchRow): void {
  const rate = r.ops / r.seconds;
  console.log(`  ${r.group.padEnd(14)} ${r.name.padEnd(52)} ${fmt(rate).padStart(14)} ${r.unit}  (${r.ops} in ${r.seconds.toFixed(3)} s)`);
}

/** The tenant of the benches' events and senders. */
export const BENCH_TENANT = "0190a7a2-7d3c-7b5e-9f00-1234567890ae";

/** The request context of the benches' commands and events: a realistic size (uuids and a trace id), so serialising it costs what it would. */
export const BENCH_REQ_CTX: RequestContext = {
  senderAccountUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ab",
  senderSessionUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ac",
  senderIdentityUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ad",
  senderTenantUuid: BENCH_TENANT,
  traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
};

/** Event `i` of the database benches: a Todo.TodoCreated with a small object payload. */
export function todoEvent(aggregateUuid: string, i: number): NewEvent {
  return {
    domain: "Todo",
    name: "TodoCreated",
    aggregateUuid,
    payload: { title: `todo number ${i}`, done: i % 2 === 0, tags: ["work", "bench"], n: i },
    tenantUuid: BENCH_TENANT,
    reqCtx: BENCH_REQ_CTX,
  };
}

/** 100 events: 10 new aggregates with 10 events each (what a busy command batch looks like). */
export function todoBatchOf100(round: number): NewEvent[] {
  const out: NewEvent[] = [];
  for (let a = 0; a < 10; a++) for (let k = 0; k < 10; k++) out.push(todoEvent(`batch-${round}-${a}`, round * 100 + a * 10 + k));
  return out;
}

/** One side of a {@link duel}: the row name's prefix (e.g. "raw (same SQL)") and one round of its work. */
export interface DuelSide {
  name: string;
  run: (round: number) => Promise<void> | void;
}

/**
 * Times mneme and each baseline in interleaved rounds (rotating who goes first)
 * and sums each side's time, so background load hits all alike; records one
 * row per side (`<name>: <what>`, mneme first) and mneme's ratio against each baseline.
 */
export async function duel(
  b: Bench,
  group: string,
  what: string,
  opsPerRound: number,
  rounds: number,
  mneme: (round: number) => Promise<void>,
  baselines: readonly DuelSide[],
  unit: string,
): Promise<void> {
  const sides: readonly DuelSide[] = [{ name: "mneme", run: mneme }, ...baselines];
  const ms = sides.map(() => 0);
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < sides.length; k++) {
      const i = (k + r) % sides.length;
      const t0 = performance.now();
      // A synchronous baseline is not awaited, so it is not charged a microtask turn.
      const done = (sides[i] as DuelSide).run(r);
      if (done !== undefined) await done;
      ms[i] = (ms[i] as number) + performance.now() - t0;
    }
  }
  const rows = sides.map((s, i) => b.record(group, `${s.name}: ${what}`, opsPerRound * rounds, (ms[i] as number) / 1000, unit));
  for (const raw of rows.slice(1)) b.compare(rows[0] as BenchRow, raw);
}
