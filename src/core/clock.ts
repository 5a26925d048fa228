import { v7 as uuidv7 } from "uuid";

let lastNs = 0;

/**
 * Nanoseconds since the Unix epoch as an integer-valued number, strictly
 * increasing within a process. A double holds such values in steps of 256 ns,
 * so two calls in the same step are bumped to the next representable value.
 */
export function nowNs(): number {
  let ns = Math.round((performance.timeOrigin + performance.now()) * 1e6);
  if (ns <= lastNs) ns = nextUp(lastNs);
  lastNs = ns;
  return ns;
}

const f64 = new Float64Array(1);
const i64 = new BigInt64Array(f64.buffer);
function nextUp(x: number): number {
  f64[0] = x;
  i64[0] = (i64[0] ?? 0n) + 1n;
  return f64[0] ?? x + 1;
}

/** A time-ordered id (uuid v7). */
export function newUuid(): string {
  return uuidv7();
}
