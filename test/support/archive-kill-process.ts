/**
 * `mneme store archive` in a process of its own, for the crash test: prints a
 * line per segment written and per segment verified, so the test can SIGKILL
 * it at a point of progress. Args: <store> <archive dir> <before> <events per segment>.
 */
import { archiveStore } from "mneme/store-copy";

const [store, dir, before, segment] = process.argv.slice(2);
const report = await archiveStore(store!, {
  before: Number(before),
  to: dir!,
  segmentEvents: Number(segment),
  onProgress: (phase, n) => process.stdout.write(`progress ${phase} ${n}\n`),
});
process.stdout.write(`done ${report.archived}\n`);
