import type pg from "pg";
import type { PoolClient, QueryResult, QueryResultRow } from "pg";
import { isConnectionError } from "./postgres-errors.js";
import type { PostgresHost } from "./postgres-hosts.js";
import { guardedClientClass } from "./postgres-pool.js";

/** Options of {@link PostgresFailoverPool}. */
export interface PostgresFailoverPoolOptions {
  /** The servers, in the connection string's order. */
  readonly hosts: readonly PostgresHost[];
  /** Connections of the pool to the writable server. */
  readonly max: number;
  /** A bound on each connection attempt (a server that does not answer counts as down). */
  readonly connectTimeoutMs: number;
  /** The driver's module (pg), loaded by the caller. */
  readonly driver: typeof pg;
  /** Shown by describeConnection (already without secrets). */
  readonly description: string;
}

/** The server the pool works against, and the pool of connections to it. */
interface Target {
  readonly index: number;
  readonly pool: pg.Pool;
  /** Clients of this pool checked out now: ended when the target is left, so nothing keeps talking to the old server. */
  readonly out: Set<PoolClient>;
}

/** After a search found no writable server, callers within this time get that answer instead of a new search. */
const SEARCH_HOLD_MS = 200;

/** SQLSTATE 08001 sqlclient_unable_to_establish_sqlconnection: mapped to UNAVAILABLE like any connection error. */
const NO_WRITABLE_SERVER = "08001";

const WRITABLE_SQL = "SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS read_only";

function ignore(): void {}

/**
 * A pool over several Postgres servers that works against the writable one,
 * as libpq does with `target_session_attrs=read-write` (node-postgres reads
 * one host and checks nothing). It searches the servers (the current one
 * first, then in the connection string's order) for one that is reachable,
 * not in recovery and not read-only, and keeps a `pg.Pool` to it. Every new
 * connection is checked once before it is handed out. When a connection
 * cannot be made or reaches a server that became read-only, the next checkout
 * searches again; if the search finds another server (a standby was
 * promoted), the old server's idle connections are ended, so are its
 * connections still checked out (the LISTEN and lock clients hear 'end' and
 * recover), and new ones go to the new server. While no server is writable,
 * checkouts fail with SQLSTATE 08001 (UNAVAILABLE once mapped).
 */
export class PostgresFailoverPool {
  /** What describeConnection shows (no secrets). */
  readonly options: { readonly connectionString: string };
  readonly #opts: PostgresFailoverPoolOptions;
  #target: Target | undefined;
  /** True when the target's server may be gone or read-only: the next checkout searches first. */
  #suspect = false;
  #search: Promise<Target> | undefined;
  #lastFailure: { at: number; error: Error } | undefined;
  readonly #verified = new WeakSet<PoolClient>();
  readonly #retiring = new Set<Promise<void>>();
  #ended = false;

  constructor(opts: PostgresFailoverPoolOptions) {
    this.#opts = opts;
    this.options = { connectionString: opts.description };
  }

  /** A connection to the writable server, checked once to be writable; release it as any pg pool client. */
  async connect(): Promise<PoolClient> {
    for (let attempt = 0; ; attempt++) {
      const target = await this.#writableTarget();
      const last = attempt >= 1;
      let client: PoolClient;
      try {
        client = await target.pool.connect();
      } catch (e) {
        if (last || !isConnectionError(e)) throw e;
        this.#suspect = true;
        continue;
      }
      const verdict = await this.#check(client);
      if (verdict === true) {
        target.out.add(client);
        return client;
      }
      this.#suspect = true;
      if (last || !isConnectionError(verdict)) throw verdict;
    }
  }

  /** Runs one statement on a connection of its own (the promise forms of pg.Pool#query). */
  async query<R extends QueryResultRow = QueryResultRow>(text: string | pg.QueryConfig, values?: unknown[]): Promise<QueryResult<R>> {
    const client = await this.connect();
    let failed: unknown;
    try {
      return await client.query<R>(text as pg.QueryConfig, values);
    } catch (e) {
      failed = e;
      throw e;
    } finally {
      client.release(failed !== undefined && isConnectionError(failed) ? (failed as Error) : undefined);
    }
  }

  /** Ends every connection; later checkouts fail. */
  async end(): Promise<void> {
    this.#ended = true;
    const target = this.#target;
    this.#target = undefined;
    if (target !== undefined) this.#retire(target, false);
    await Promise.allSettled([...this.#retiring]);
  }

  /** True when the client's server takes writes; else the error to fail the checkout with (the client is destroyed). */
  async #check(client: PoolClient): Promise<true | Error> {
    if (this.#verified.has(client)) return true;
    // pg-pool listens for 'error' only on idle clients: this one is ours until the check is done.
    client.on("error", ignore);
    try {
      const row = (await client.query<{ recovery: boolean; read_only: string }>(WRITABLE_SQL)).rows[0];
      if (row?.recovery === false && row.read_only === "off") {
        this.#verified.add(client);
        return true;
      }
      const e = noWritableServer(`the server became ${row?.recovery === true ? "a standby (in recovery)" : "read-only"}`);
      client.release(e);
      return e;
    } catch (e) {
      client.release(e instanceof Error ? e : true);
      return e instanceof Error ? e : new Error(String(e));
    } finally {
      client.removeListener("error", ignore);
    }
  }

  /** The target, after a search when it is unknown or suspect. */
  async #writableTarget(): Promise<Target> {
    if (this.#ended) throw new Error("Cannot use a pool after calling end on the pool");
    if (this.#target !== undefined && !this.#suspect) return this.#target;
    const failure = this.#lastFailure;
    if (failure !== undefined && Date.now() - failure.at < SEARCH_HOLD_MS) throw failure.error;
    this.#search ??= this.#searchOnce().finally(() => {
      this.#search = undefined;
    });
    return this.#search;
  }

  async #searchOnce(): Promise<Target> {
    const hosts = this.#opts.hosts;
    const current = this.#target?.index;
    const order = [...hosts.keys()].sort((a, b) => Number(b === current) - Number(a === current) || a - b);
    const verdicts = await Promise.all(order.map((i) => this.#probe(hosts[i] as PostgresHost)));
    const found = verdicts.findIndex((v) => v === true);
    if (this.#ended) throw new Error("Cannot use a pool after calling end on the pool");
    if (found < 0) {
      const states = order.map((i, k) => `${(hosts[i] as PostgresHost).label} (${String(verdicts[k])})`).join(", ");
      const error = noWritableServer(`no writable server among ${states}`);
      this.#lastFailure = { at: Date.now(), error };
      throw error;
    }
    this.#lastFailure = undefined;
    const index = order[found] as number;
    this.#suspect = false;
    const old = this.#target;
    if (old?.index === index) return old;
    if (old !== undefined) this.#retire(old, true);
    const target = this.#newTarget(index);
    this.#target = target;
    return target;
  }

  /** Connects to one server apart from the pool: true when it takes writes, else what it is (in recovery, read-only, the error). */
  async #probe(host: PostgresHost): Promise<true | string> {
    const client = new this.#opts.driver.Client({
      connectionString: host.connectionString,
      connectionTimeoutMillis: this.#opts.connectTimeoutMs,
    });
    client.on("error", ignore);
    try {
      await client.connect();
      const row = (await client.query<{ recovery: boolean; read_only: string }>(WRITABLE_SQL)).rows[0];
      if (row?.recovery === true) return "in recovery";
      return row?.read_only === "off" ? true : "read-only";
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      return typeof code === "string" ? code : e instanceof Error ? e.message : String(e);
    } finally {
      void client.end().catch(ignore);
    }
  }

  #newTarget(index: number): Target {
    const pool = new this.#opts.driver.Pool({
      connectionString: (this.#opts.hosts[index] as PostgresHost).connectionString,
      max: this.#opts.max,
      connectionTimeoutMillis: this.#opts.connectTimeoutMs,
      keepAlive: true,
      Client: guardedClientClass(this.#opts.driver.Client),
    });
    // An idle client that loses its connection is removed by the pool, which then emits 'error'.
    pool.on("error", ignore);
    const out = new Set<PoolClient>();
    pool.on("release", (_err: unknown, client: PoolClient) => out.delete(client));
    pool.on("remove", (client: PoolClient) => out.delete(client));
    return { index, pool, out };
  }

  /** Leaves a target: ends its idle connections and, when `cutCheckedOut`, those still checked out. */
  #retire(target: Target, cutCheckedOut: boolean): void {
    if (cutCheckedOut) {
      for (const client of target.out) {
        // The holder hears 'end' (CheckedOutClient marks the client lost) and releases it.
        void client.end().catch(ignore);
      }
    }
    const ending = target.pool.end().catch(ignore);
    this.#retiring.add(ending);
    void ending.then(() => this.#retiring.delete(ending));
  }
}

function noWritableServer(why: string): Error {
  return Object.assign(new Error(`postgres: no writable server: ${why}`), { code: NO_WRITABLE_SERVER });
}
