import { randomInt } from "node:crypto";
import type { CheckedOutClient } from "./postgres-pool.js";

/** Tries of a fresh key before the claims go without a session (a key taken by chance: another holder, a readmodel lock). */
const KEY_TRIES = 3;

/**
 * The session behind a command store's claims: one dedicated client holding
 * a session-level advisory lock on a random key while the store is open.
 * Each claim records that key; another instance that finds a claim whose key
 * is no longer locked knows its holder's session ended (the process was
 * killed, crashed, or lost its connection) and takes the claim over at once.
 * The lock dies with the session, which Postgres ends as soon as the
 * process's connection closes.
 */
export class PostgresClaimSession {
  #client: CheckedOutClient | undefined;
  #key: number | undefined;
  #opening: Promise<number | undefined> | undefined;
  #closed = false;

  constructor(private readonly checkout: (onLost: () => void) => Promise<CheckedOutClient>) {}

  /**
   * The key of the live session, opened at the first claim (and again after
   * it was lost). Undefined when it cannot be opened now: the claim then
   * holds by its lease alone.
   */
  async key(): Promise<number | undefined> {
    if (this.#closed) return undefined;
    if (this.#client !== undefined && !this.#client.lost) return this.#key;
    this.#opening ??= this.#open().finally(() => (this.#opening = undefined));
    return this.#opening;
  }

  async #open(): Promise<number | undefined> {
    this.#drop();
    let client: CheckedOutClient;
    try {
      client = await this.checkout(() => this.#drop());
    } catch {
      return undefined;
    }
    try {
      for (let i = 0; i < KEY_TRIES; i++) {
        // Below 2^52: exact in a JS number; the lock's two halves are pg_locks' classid and objid.
        const key = randomInt(1, 2 ** 20) * 2 ** 32 + randomInt(0, 2 ** 32);
        const res = await client.query<{ ok: boolean }>("SELECT pg_try_advisory_lock($1::bigint) AS ok", [key]);
        if (res.rows[0]?.ok === true) {
          if (this.#closed) break;
          this.#client = client;
          this.#key = key;
          return key;
        }
      }
    } catch {
      // The session failed while taking its lock: the claims hold by their lease until it is opened again.
      client.release(true);
      return undefined;
    }
    client.release(true);
    return undefined;
  }

  #drop(): void {
    const c = this.#client;
    this.#client = undefined;
    this.#key = undefined;
    c?.release(true);
  }

  /** Ends the session: its lock goes with it (claims still held fall back to their lease). */
  close(): void {
    this.#closed = true;
    this.#drop();
  }
}
