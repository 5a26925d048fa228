import { archiveStore, restoreStoreArchive } from "../store-copy/index.js";

/** What `mneme store archive` is given. */
export interface StoreArchiveArgs {
  readonly store: string;
  /** `--before`: a position, or an ISO date. */
  readonly before?: string;
  /** `--to`: the archive directory. */
  readonly to?: string;
  /** `--restore`: bring the archived events back instead. */
  readonly restore: boolean;
  /** `--from` with --restore: where the archive is now, when it was moved. */
  readonly from?: string;
  readonly segmentEvents?: number;
}

interface Out {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

/** A `--before` value: a position (digits) or a date (anything Date parses as ISO 8601). */
export function parseBefore(text: string): number | Date | undefined {
  if (/^[1-9][0-9]{0,15}$/.test(text)) return Number(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text)) return undefined;
  const d = new Date(text);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

/**
 * Runs `mneme store archive`: moves the events below `--before` into
 * verified files under `--to`, or with `--restore` brings every archived
 * event back. Prints what it did; returns the exit code (0 done, also when
 * there was nothing to do). Refusals and failures throw (exit 1 by main).
 */
export async function runStoreArchive(args: StoreArchiveArgs, out: Out, err: Out): Promise<number> {
  if (args.restore) {
    const report = await restoreStoreArchive(args.store, args.from === undefined ? {} : { from: args.from });
    if (report.restored === 0) {
      out.write(`mneme: store archive --restore ${report.store}: nothing is archived\n`);
      return 0;
    }
    out.write(
      `mneme: store archive --restore ${report.store}: ${report.restored} events of ${report.ranges.length} range(s) are back in the database ` +
        `in ${report.seconds.toFixed(1)} s\n` +
        report.ranges
          .map((r) => `restored positions ${r.fromPosition + 1}..${r.toPosition} from ${r.directory} (the files are no longer used)\n`)
          .join(""),
    );
    return 0;
  }
  const before = args.before === undefined ? undefined : parseBefore(args.before);
  if (before === undefined) throw new Error(`--before must be a position (an integer >= 1) or an ISO date, got "${args.before ?? ""}"`);
  let lastDraw = 0;
  const report = await archiveStore(args.store, {
    before,
    to: args.to!,
    ...(args.segmentEvents === undefined ? {} : { segmentEvents: args.segmentEvents }),
    onProgress: (phase, events) => {
      if (err.isTTY !== true) return;
      const now = Date.now();
      if (now - lastDraw < 100) return;
      lastDraw = now;
      err.write(`\r\x1b[2Karchive: ${phase} ${events} events`);
    },
  });
  if (err.isTTY === true) err.write("\n");
  if (report.range === undefined) {
    out.write(`mneme: store archive ${report.store}: nothing archived: ${report.reason ?? ""}\n`);
    return 0;
  }
  const r = report.range;
  out.write(
    `mneme: store archive ${report.store}: ${report.archived} events of positions ${r.fromPosition + 1}..${r.toPosition} archived ` +
      `in ${report.seconds.toFixed(1)} s\n` +
      `directory ${r.directory}\nmanifest sha256 ${r.manifestSha256}\nchain head position ${r.chainHead.position} hash ${r.chainHead.hash}\n`,
  );
  return 0;
}
