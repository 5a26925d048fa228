/**
 * A tenant mover in a process of its own, for a test to SIGKILL: argv[2] is
 * the JSON of moveTenant's options (without onProgress), argv[3] the progress
 * step at which it stops (0: never), or the phase at whose first step it stops. At that step it prints "stopped <step>
 * <phase>" and blocks its thread, so the kill lands at a point of progress,
 * not of time (it prints "ready" first, for a kill at a time after it). A finished move prints "moved <report as JSON>"; a move that
 * failed prints "failed <JSON of { mneme, code, message }>" (whatever failed:
 * a rejection of moveTenant, an uncaught exception, an unhandled rejection).
 */
import { isMnemeError } from "mneme";
import { moveTenant, type TenantMoveOptions } from "mneme/shards";

function failed(e: unknown): never {
  const code = (e as { code?: unknown } | null)?.code;
  const message = e instanceof Error ? e.message : String(e);
  process.stdout.write(
    `failed ${JSON.stringify({ mneme: isMnemeError(e), code, message, stack: e instanceof Error ? e.stack : undefined })}\n`,
  );
  process.exit(1);
}
process.on("uncaughtException", failed);
process.on("unhandledRejection", failed);

process.stdout.write("ready\n");
const options = JSON.parse(process.argv[2]!) as TenantMoveOptions;
const stopArg = process.argv[3] ?? "0";
const stopAt = /^\d+$/.test(stopArg) ? Number(stopArg) : -1;
const block = new Int32Array(new SharedArrayBuffer(4));
let step = 0;
const report = await moveTenant({
  ...options,
  onProgress: (p) => {
    step++;
    process.stdout.write(`progress ${String(step)} ${p.phase} ${String(p.copiedThrough)}\n`);
    if (step === stopAt || p.phase === stopArg) {
      // A pipe is written synchronously on Linux: the line is out before the thread blocks.
      process.stdout.write(`stopped ${String(step)} ${p.phase}\n`);
      Atomics.wait(block, 0, 0, 120_000);
      process.exit(3);
    }
  },
}).catch(failed);
process.stdout.write(`moved ${JSON.stringify(report)}\n`);
