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

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
const POOL_SIZE = 8192;
const pool = new Uint8Array(POOL_SIZE);
let poolPos = POOL_SIZE;
let lastMs = 0;
let seq = 0;

function randomBytes(n: number): number {
  if (poolPos + n > POOL_SIZE) {
    crypto.getRandomValues(pool);
    poolPos = 0;
  }
  const at = poolPos;
  poolPos += n;
  return at;
}

/**
 * A time-ordered id (RFC 9562 uuid v7), monotonic within a process: ids made
 * in the same millisecond count up in the 12-bit `rand_a` field (method 1 of
 * RFC 9562 6.2), moving into the next millisecond if that field overflows.
 * Random bits come from the web crypto API, drawn from a pool for speed.
 */
export function newUuid(): string {
  let ms = Date.now();
  if (ms > lastMs) {
    lastMs = ms;
    const r = randomBytes(2);
    seq = ((pool[r]! << 8) | pool[r + 1]!) & 0x7ff; // start in the lower half: room to count up
  } else {
    ms = lastMs;
    seq++;
    if (seq > 0xfff) {
      lastMs = ++ms;
      seq = 0;
    }
  }
  const r = randomBytes(8);
  const hi = Math.floor(ms / 0x10000);
  const lo = ms & 0xffff;
  return (
    HEX[(hi >>> 24) & 0xff]! +
    HEX[(hi >>> 16) & 0xff]! +
    HEX[(hi >>> 8) & 0xff]! +
    HEX[hi & 0xff]! +
    "-" +
    HEX[lo >>> 8]! +
    HEX[lo & 0xff]! +
    "-" +
    HEX[0x70 | (seq >>> 8)]! +
    HEX[seq & 0xff]! +
    "-" +
    HEX[0x80 | (pool[r]! & 0x3f)]! +
    HEX[pool[r + 1]!]! +
    "-" +
    HEX[pool[r + 2]!]! +
    HEX[pool[r + 3]!]! +
    HEX[pool[r + 4]!]! +
    HEX[pool[r + 5]!]! +
    HEX[pool[r + 6]!]! +
    HEX[pool[r + 7]!]!
  );
}
