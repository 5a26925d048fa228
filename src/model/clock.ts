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

/** The two hex digits of each byte as character codes: HEX_CODES[2b] and HEX_CODES[2b + 1]. */
const HEX_CODES: Uint8Array = new Uint8Array(512);
for (let b = 0; b < 256; b++) {
  HEX_CODES[2 * b] = "0123456789abcdef".charCodeAt(b >>> 4);
  HEX_CODES[2 * b + 1] = "0123456789abcdef".charCodeAt(b & 15);
}
const POOL_SIZE = 8192;
const pool = new Uint8Array(POOL_SIZE);
let poolPos = POOL_SIZE;
let lastMs = 0;
let seq = 0;
/** The character codes of the uuid being made; the dashes stay where they are. */
const codes: number[] = Array.from("00000000-0000-0000-0000-000000000000", (c) => c.charCodeAt(0));
/** Where the hex digits of byte i of a uuid go. */
const AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34] as const;
const fromCharCodes = String.fromCharCode as (...codes: number[]) => string;

function randomBytes(n: number): number {
  if (poolPos + n > POOL_SIZE) {
    crypto.getRandomValues(pool);
    poolPos = 0;
  }
  const at = poolPos;
  poolPos += n;
  return at;
}

function putByte(i: number, b: number): void {
  const at = AT[i]!;
  codes[at] = HEX_CODES[2 * b]!;
  codes[at + 1] = HEX_CODES[2 * b + 1]!;
}

/**
 * A time-ordered id (RFC 9562 uuid v7), monotonic within a process: ids made
 * in the same millisecond count up in the 12-bit `rand_a` field (method 1 of
 * RFC 9562 6.2), moving into the next millisecond if that field overflows.
 * Random bits come from the web crypto API, drawn from a pool for speed. The
 * string is made from its character codes in one step: a flat string, not
 * the chain of concatenations that a map lookup would have to flatten first.
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
  putByte(0, (hi >>> 24) & 0xff);
  putByte(1, (hi >>> 16) & 0xff);
  putByte(2, (hi >>> 8) & 0xff);
  putByte(3, hi & 0xff);
  putByte(4, lo >>> 8);
  putByte(5, lo & 0xff);
  putByte(6, 0x70 | (seq >>> 8));
  putByte(7, seq & 0xff);
  putByte(8, 0x80 | (pool[r]! & 0x3f));
  for (let i = 1; i < 8; i++) putByte(8 + i, pool[r + i]!);
  return fromCharCodes(...codes);
}
