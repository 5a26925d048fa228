/**
 * Kill rounds of a crash test: an app process (test/support/*-app-process.ts)
 * that prints "stored <n>" as its store grows is killed with SIGKILL at a
 * random point of progress, not of time (a time-based kill flaked: on a quiet
 * machine the work was done before the first kill), then run to its end.
 */
import { expect } from "vitest";
import { runKillable } from "./run-process.js";

/** The increments a run stored since it started, from its "stored <n>" lines. */
export function storedThisRun(out: string): number {
  const counts = [...out.matchAll(/^stored (\d+)$/gm)].map((m) => Number(m[1]));
  return counts.length === 0 ? 0 : counts[counts.length - 1]! - counts[0]!;
}

/**
 * Runs `script` up to `rounds` times, each killed with SIGKILL once it stored a random number of increments
 * (between `min` and `max`) in that run, then once to its end; resolves the last run's output. A round that
 * finished its work before its kill point ends the kill rounds; the first one cannot (it has more work than `max`)
 * and must have been killed.
 */
export async function killedThenFinished(
  script: string,
  cwd: string,
  args: string[],
  rounds: number,
  min: number,
  max: number,
): Promise<string> {
  const kills: number[] = [];
  let killed = 0;
  for (let round = 0; round < rounds; round++) {
    const at = min + Math.floor(Math.random() * (max - min + 1));
    kills.push(at);
    const r = await runKillable(script, args, cwd, (out) => storedThisRun(out) >= at);
    if (r.signal === "SIGKILL") {
      killed++;
      continue;
    }
    expect(r.out, `round ${round} ended before its kill after ${at} increments, so it must have finished`).toContain("done");
    break;
  }
  expect(killed, `kills after ${kills.join(", ")} increments`).toBeGreaterThan(0);
  const last = await runKillable(script, args, cwd);
  expect(last.out, `kills after ${kills.join(", ")} increments`).toContain("done");
  return last.out;
}
