/**
 * Password hashing with scrypt (node:crypto): a random salt per hash and the
 * cost parameters recorded next to it, so hashes made with older parameters
 * still verify after the defaults are raised.
 */
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";
import { MnemeError } from "../model/errors.js";

/** scrypt cost parameters: N (CPU/memory cost, a power of two), r (block size), p (parallelism). */
export interface ScryptParams {
  readonly N: number;
  readonly r: number;
  readonly p: number;
  /** Bytes of derived key. Default 64. */
  readonly keyLength?: number;
}

/** A stored password hash: what an event may hold instead of a password. */
export interface PasswordHash {
  readonly algorithm: "scrypt";
  readonly N: number;
  readonly r: number;
  readonly p: number;
  readonly keyLength: number;
  /** base64 */
  readonly salt: string;
  /** base64 */
  readonly hash: string;
}

/** 32 MiB and about 100 ms per hash on a current server core: the interactive-login setting. */
export const DEFAULT_SCRYPT: Readonly<Required<ScryptParams>> = Object.freeze({ N: 32_768, r: 8, p: 1, keyLength: 64 });

/** Shortest password accepted. */
export const PASSWORD_MIN_LENGTH = 8;
/** Bounds the work one request can cause (scrypt reads all of it). */
export const PASSWORD_MAX_LENGTH = 1024;
const SALT_BYTES = 16;

/** Rejects cost parameters that are not what scrypt accepts, or that would let a stored hash exhaust memory. */
export function checkScryptParams(params: ScryptParams): Required<ScryptParams> {
  const { N, r, p } = params;
  const keyLength = params.keyLength ?? DEFAULT_SCRYPT.keyLength;
  const ok =
    Number.isInteger(N) &&
    N >= 2 &&
    N <= 2 ** 20 &&
    (N & (N - 1)) === 0 &&
    Number.isInteger(r) &&
    r >= 1 &&
    r <= 32 &&
    Number.isInteger(p) &&
    p >= 1 &&
    p <= 16 &&
    Number.isInteger(keyLength) &&
    keyLength >= 16 &&
    keyLength <= 128;
  if (!ok) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `scrypt parameters must be N a power of two in 2..2^20, r in 1..32, p in 1..16, keyLength in 16..128 (got N=${String(N)}, r=${String(r)}, p=${String(p)}, keyLength=${String(keyLength)})`,
    );
  }
  return { N, r, p, keyLength };
}

/** Throws VALIDATION_FAILED unless the password is a string of 8..1024 characters; the message never shows it. */
export function checkPasswordPolicy(password: unknown, field = "password"): asserts password is string {
  if (typeof password !== "string" || password.length < PASSWORD_MIN_LENGTH || password.length > PASSWORD_MAX_LENGTH) {
    throw new MnemeError("VALIDATION_FAILED", `${field} must be a string of ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters`, {
      details: [{ pointer: `/${field}`, message: `must have ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters` }],
    });
  }
}

function derive(password: string, salt: Buffer, p: Required<ScryptParams>): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // scrypt needs about 128 * N * r bytes; the default maxmem (32 MiB) would refuse N = 2^15, r = 8.
    const maxmem = 256 * p.N * p.r + 16 * 1024 * 1024;
    scrypt(password.normalize("NFC"), salt, p.keyLength, { N: p.N, r: p.r, p: p.p, maxmem }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

/** Hashes a password with a fresh random salt; runs on the libuv pool, so it does not block the event loop. */
export async function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT): Promise<PasswordHash> {
  checkPasswordPolicy(password);
  const p = checkScryptParams(params);
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, p);
  return {
    algorithm: "scrypt",
    N: p.N,
    r: p.r,
    p: p.p,
    keyLength: p.keyLength,
    salt: salt.toString("base64"),
    hash: key.toString("base64"),
  };
}

/** True when `password` matches `stored`; compares in constant time with the parameters the hash was made with. */
export async function verifyPassword(password: unknown, stored: PasswordHash): Promise<boolean> {
  if (stored?.algorithm !== "scrypt") return false;
  const p = checkScryptParams(stored);
  const expected = Buffer.from(stored.hash, "base64");
  // A password of the wrong type or length still costs one derivation, so timing does not tell it apart.
  const candidate = typeof password === "string" && password.length <= PASSWORD_MAX_LENGTH ? password : "";
  const key = await derive(candidate, Buffer.from(stored.salt, "base64"), p);
  return key.length === expected.length && timingSafeEqual(key, expected) && candidate === password;
}

/**
 * A hash of a random password with the given parameters: a login for an
 * unknown email verifies against it, so it takes as long as a login with a
 * wrong password. The caller keeps it (registerDefaults: one per facade).
 */
export function dummyPasswordHash(params: ScryptParams): Promise<PasswordHash> {
  return hashPassword(randomBytes(24).toString("base64"), checkScryptParams(params));
}
