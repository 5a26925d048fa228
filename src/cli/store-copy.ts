import { copyStore, type CopyProgress, type CopyStoreReport } from "../store-copy/index.js";

/** What `mneme store copy` is given. */
export interface StoreCopyArgs {
  readonly from: string;
  readonly to: string;
  readonly resume: boolean;
  readonly pageSize?: number;
}

/** Where progress goes: a bar redrawn on a terminal, a line per table and phase otherwise. */
interface ProgressOut {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

/**
 * Runs `mneme store copy`: copies, prints the report (each table's rows and
 * digest on both sides, then the store's digests) to stdout. Returns the exit
 * code: 0 verified, 1 a table differs.
 */
export async function runStoreCopy(args: StoreCopyArgs, out: ProgressOut, err: ProgressOut): Promise<number> {
  const report = await copyStore({
    from: args.from,
    to: args.to,
    resume: args.resume,
    ...(args.pageSize === undefined ? {} : { pageSize: args.pageSize }),
    onProgress: progressPrinter(err),
  });
  out.write(formatReport(report));
  return report.verified ? 0 : 1;
}

function progressPrinter(err: ProgressOut): (p: CopyProgress) => void {
  let last = "";
  let lastDraw = 0;
  return (p) => {
    const key = `${p.phase} ${p.table}`;
    if (err.isTTY !== true) {
      // One line when a table starts and one when it is done: a log stays readable.
      if (key !== last) err.write(`mneme: ${p.phase} ${p.table}: ${p.total} rows\n`);
      last = key;
      return;
    }
    const now = Date.now();
    if (key === last && now - lastDraw < 100 && p.done < p.total) return;
    last = key;
    lastDraw = now;
    const width = 30;
    const share = p.total === 0 ? 1 : Math.min(1, p.done / p.total);
    const filled = Math.round(share * width);
    err.write(`\r\x1b[2K${p.phase} ${p.table.padEnd(22)} [${"#".repeat(filled)}${" ".repeat(width - filled)}] ${p.done}/${p.total}`);
    if (p.done >= p.total) err.write("\n");
  };
}

/** The report as a person reads it. */
export function formatReport(r: CopyStoreReport): string {
  const lines = [`mneme: store copy ${r.resumed ? "(resumed) " : ""}from ${r.from} to ${r.to} in ${r.seconds.toFixed(1)} s`];
  lines.push(`${"table".padEnd(24)}${"source rows".padStart(12)}${"target rows".padStart(12)}${"copied".padStart(10)}  digest`);
  for (const t of r.tables) {
    const digest = t.matches
      ? t.source.sha256.slice(0, 16)
      : `DIFFERS source ${t.source.sha256.slice(0, 16)} target ${t.target.sha256.slice(0, 16)}`;
    lines.push(
      `${t.table.padEnd(24)}${String(t.source.rows).padStart(12)}${String(t.target.rows).padStart(12)}${String(t.copied).padStart(10)}  ${digest}`,
    );
  }
  lines.push(`source digest ${r.sourceDigest}`, `target digest ${r.targetDigest}`);
  if (r.restoredFromZero.length > 0)
    lines.push(`SQL-table readmodels not copied (they restore from zero on the target): ${r.restoredFromZero.join(", ")}`);
  lines.push(r.verified ? "verified: every table has the same rows and digest" : "NOT VERIFIED: a table differs (see above)");
  return `${lines.join("\n")}\n`;
}
