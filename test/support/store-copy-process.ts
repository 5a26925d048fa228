/**
 * A store copy that stops on its own at a chosen point, for a test to SIGKILL
 * it there: argv from, to, page size, table, rows. Once the copy of `table`
 * has committed at least `rows` rows it prints "paused <done>" and blocks its
 * thread (no timer decides where the kill lands).
 */
import { copyStore } from "mneme/store-copy";

const [from, to, pageSize, table, rows] = process.argv.slice(2);
const block = new Int32Array(new SharedArrayBuffer(4));
await copyStore({
  from: from!,
  to: to!,
  pageSize: Number(pageSize),
  onProgress: (p) => {
    if (p.phase === "copy" && p.table === table && p.done >= Number(rows)) {
      // A pipe is written synchronously on Linux: the line is out before the thread blocks.
      process.stdout.write(`paused ${p.done}\n`);
      Atomics.wait(block, 0, 0, 120_000);
      process.exit(3);
    }
  },
});
process.stdout.write("finished\n");
