import { verifyStore } from "../store-copy/index.js";

/** What `mneme store verify` is given. */
export interface StoreVerifyArgs {
  readonly store: string;
  readonly pageSize?: number;
  /** Where the store's archive of old events is now, when it was moved. */
  readonly archiveDirectory?: string;
}

interface Out {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

/**
 * Runs `mneme store verify`: recomputes the store's hash chain, with a
 * progress line on a terminal (stderr), and prints the outcome to stdout.
 * Returns the exit code: 0 the chain holds, 1 it is broken (the first broken
 * position is printed).
 */
export async function runStoreVerify(args: StoreVerifyArgs, out: Out, err: Out): Promise<number> {
  let lastDraw = 0;
  const report = await verifyStore(args.store, {
    ...(args.pageSize === undefined ? {} : { pageSize: args.pageSize }),
    ...(args.archiveDirectory === undefined ? {} : { archiveDirectory: args.archiveDirectory }),
    onProgress: (checked, position, total) => {
      if (err.isTTY !== true) return;
      const now = Date.now();
      if (now - lastDraw < 100 && checked < total) return;
      lastDraw = now;
      err.write(`\r\x1b[2Kverify events ${checked}/${total} (position ${position})`);
    },
  });
  if (err.isTTY === true) err.write("\n");
  if (report.ok) {
    const { removed, byType } = report.removals;
    // A tombstone's hash is not recomputed (its bytes are gone): say how many there are and what they were.
    const removals =
      removed === 0
        ? ""
        : `of which ${removed} removed by retention (${Object.entries(byType)
            .map(([t, n]) => `${t} ${n}`)
            .join(", ")}): each links to the chain and its removal record is in it\n`;
    out.write(
      `mneme: store verify ${report.store}: the hash chain holds: ${report.checked} events in ${report.seconds.toFixed(1)} s\n` +
        removals +
        `head position ${report.head.position} hash ${report.head.hash}\n`,
    );
    return 0;
  }
  out.write(
    `mneme: store verify ${report.store}: the hash chain is BROKEN at position ${report.position}\n` +
      `${report.reason}\n` +
      `verified: ${report.checked} events, up to position ${report.lastGoodPosition}\n`,
  );
  return 1;
}
