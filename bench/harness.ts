/**
 * Tiny benchmark harness: every bench module exports `default async function (b: Bench)`.
 * Figures are printed as one table; ratios compare mneme with the raw driver
 * doing the same work in the same run.
 */
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
    row.ratio = (row.ops / row.seconds) / (baseline.ops / baseline.seconds);
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
