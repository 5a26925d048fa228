import type { Pool, PoolClient, QueryConfig, QueryResult, QueryResultRow } from "pg";
import { isConnectionError, mapPgError } from "./postgres-errors.js";
import { redactConnectionString } from "./postgres-hosts.js";

/**
 * The few methods of a `pg.Pool` that the Postgres backends use, so a caller
 * may pass any pool-shaped object (a wrapped or instrumented pool) typed structurally.
 */
export type PgPool = Pick<Pool, "query" | "connect"> & { readonly options?: unknown };

/** A client checked out of a {@link PgPool}; `release(true)` destroys it (ends its session). */
export type PgClient = PoolClient;

/**
 * What mneme uses a checked-out client for: `append` (one append), `read`
 * (event reads: loadAggregate, a readAll page, the head position), `transaction`
 * (a readmodel transaction), `readmodel` (a readmodel statement outside a
 * transaction), `listen` (the LISTEN client), `lock` (the readmodel lock
 * client), `command`, `log` (their stores), `ddl` (init()).
 */
export type PgClientKind = "append" | "read" | "transaction" | "readmodel" | "listen" | "lock" | "command" | "log" | "ddl";

/** A statement about to be sent, as told to a {@link PgStatementHook}. */
export interface PgStatement {
  readonly kind: PgClientKind;
  /** The SQL text. */
  readonly text: string;
  /** The backend process id of the client's session (`pg_stat_activity.pid`), when known. */
  readonly processId: number | undefined;
}

/**
 * A testing aid for fault injection: awaited before every statement mneme
 * sends on a client it checked out, so a test can end that session
 * (`pg_terminate_backend(processId)`) at an exact statement boundary. A hook
 * that throws fails the statement with that error. Leave it unset in production.
 */
export type PgStatementHook = (statement: PgStatement) => void | Promise<void>;

/** A statement with its parameters; `rowMode: "array"` returns rows as arrays. */
export interface PgQuery {
  /** Prepares the statement under this name once per connection (its text must be the same wherever the name is used). */
  readonly name?: string;
  readonly text: string;
  readonly values?: unknown[];
  readonly rowMode?: "array";
  /** "extended": sent as Parse/Bind/Execute even without values, so the server takes exactly one statement. */
  readonly queryMode?: "extended";
}

/**
 * A client mneme checked out of the pool. It listens for 'error' (and 'end')
 * for as long as it is checked out: pg-pool removes its own listener at
 * checkout, and a session that dies between two statements (a database
 * restart, a failover, `pg_terminate_backend`, idle_in_transaction_session_timeout)
 * emits 'error' with nobody listening, which would end the process. Such a
 * client is marked lost, its next statement fails (UNAVAILABLE once mapped),
 * and `release()` destroys it instead of returning it to the pool.
 */
export class CheckedOutClient {
  #lost: unknown = undefined;
  #released = false;
  readonly #onLost: ((error: unknown) => void) | undefined;
  readonly #errorListener = (e: unknown): void => this.#markLost(e ?? new Error("Connection terminated"));
  readonly #endListener = (): void => this.#markLost(new Error("Connection terminated"));

  constructor(
    /** The driver's client; add listeners of your own to it (e.g. 'notification'), never 'error' handling that throws. */
    readonly raw: PgClient,
    readonly kind: PgClientKind,
    private readonly hook: PgStatementHook | undefined,
    onLost?: (error: unknown) => void,
  ) {
    this.#onLost = onLost;
    raw.on("error", this.#errorListener);
    raw.on("end", this.#endListener);
  }

  /** True once the connection failed (an 'error' or an unexpected 'end'): the client must not be reused. */
  get lost(): boolean {
    return this.#lost !== undefined;
  }

  /** The backend process id of the session, when known. */
  get processId(): number | undefined {
    const pid = (this.raw as { processID?: unknown }).processID;
    return typeof pid === "number" ? pid : undefined;
  }

  /** Sends one statement (after the statement hook, when one is set); driver errors are thrown as they are. */
  async query<R extends QueryResultRow = QueryResultRow>(q: PgQuery | string, values?: unknown[]): Promise<QueryResult<R>> {
    const config = typeof q === "string" ? { text: q, values } : q;
    if (this.hook !== undefined) await this.hook({ kind: this.kind, text: config.text, processId: this.processId });
    // rowMode "array" gives rows as arrays: the caller's R says so.
    return await this.raw.query(config as unknown as QueryConfig);
  }

  /**
   * Returns the client to the pool, or destroys it (ends its session) when
   * `destroy` is true or the connection failed. Safe to call twice.
   */
  release(destroy = false): void {
    if (this.#released) return;
    this.#released = true;
    const dead = destroy || this.#lost !== undefined;
    this.raw.removeListener("end", this.#endListener);
    // A dying connection may still report an error while it closes: a destroyed client keeps the
    // listener (it does nothing once released); a healthy one goes back to the pool without it.
    if (!dead) this.raw.removeListener("error", this.#errorListener);
    try {
      this.raw.release(dead ? (this.#lost instanceof Error ? this.#lost : true) : undefined);
    } catch {
      // Released already (the pool throws on a second release).
    }
  }

  #markLost(e: unknown): void {
    if (this.#released || this.#lost !== undefined) return;
    this.#lost = e;
    try {
      this.#onLost?.(e);
    } catch {
      // A listener's failure must not escape from the driver's event.
    }
  }
}

function ignore(): void {}

/**
 * Checks a client out of `pool` for `kind` of work; a failure to connect is
 * the MnemeError of `mapPgError` (UNAVAILABLE when the database cannot be reached).
 */
export async function checkout(
  pool: PgPool,
  kind: PgClientKind,
  hook: PgStatementHook | undefined,
  what: string,
  onLost?: (error: unknown) => void,
): Promise<CheckedOutClient> {
  let raw: PgClient;
  try {
    raw = await pool.connect();
  } catch (e) {
    throw mapPgError(e, `${what}: connecting`);
  }
  // No await between the checkout and the listener: an 'error' comes from I/O, never in between.
  return new CheckedOutClient(raw, kind, hook, onLost);
}

/**
 * Runs `fn` on a client checked out for it, then releases the client
 * (destroyed when its connection failed). Errors of `fn` are thrown as they are.
 */
export async function withClient<R>(
  pool: PgPool,
  kind: PgClientKind,
  hook: PgStatementHook | undefined,
  what: string,
  fn: (client: CheckedOutClient) => Promise<R>,
): Promise<R> {
  const client = await checkout(pool, kind, hook, what);
  let failed: unknown;
  try {
    return await fn(client);
  } catch (e) {
    failed = e;
    throw e;
  } finally {
    client.release(failed !== undefined && isConnectionError(failed));
  }
}

/**
 * A client class for the pools mneme makes: each client listens for 'error'
 * from its construction to its end with a listener that does nothing. The
 * listeners that act (the pool's while idle, `CheckedOutClient`'s while
 * checked out, pg-pool's during `pool.query`) still get every error; this one
 * only keeps a session terminated in a window none of them covers (between
 * two listeners, or during `end()`) from being an 'error' event nobody
 * listens to, which ends the process. Such a client is not queryable any
 * more, and its next statement fails with the driver's error.
 */
const guardedClients = new WeakMap<object, unknown>();
export function guardedClientClass<C extends new (...args: any[]) => { on(event: "error", fn: (e: unknown) => void): unknown }>(
  Client: C,
): C {
  const known = guardedClients.get(Client);
  if (known !== undefined) return known as C;
  const Guarded = class extends Client {
    constructor(...args: any[]) {
      super(...args);
      this.on("error", ignore);
    }
  };
  guardedClients.set(Client, Guarded);
  return Guarded;
}

const guardedPools = new WeakSet<object>();

/**
 * Adds an 'error' listener to `pool` (once per pool) when it is an
 * EventEmitter: a pg.Pool emits 'error' when an idle client loses its
 * connection (the pool removes that client itself), and an 'error' event
 * nobody listens to ends the process. Listeners of the pool's owner still run.
 */
export function listenForPoolErrors(pool: PgPool): void {
  const emitter = pool as Partial<Pick<Pool, "on">>;
  if (typeof emitter.on !== "function" || guardedPools.has(pool)) return;
  guardedPools.add(pool);
  emitter.on.call(pool, "error", ignore);
}

/**
 * A description of where the data lives, without secrets: `postgres://user@host:port/db schema=s`.
 * The password (in the URL or in pool options) is never included.
 */
export function describeConnection(source: string | PgPool, schema: string): string {
  let target = "postgres";
  if (typeof source === "string") {
    target = redactConnectionString(source);
  } else {
    const o = source.options as
      { connectionString?: unknown; host?: unknown; port?: unknown; user?: unknown; database?: unknown } | undefined;
    if (typeof o?.connectionString === "string") target = redactConnectionString(o.connectionString);
    else if (o !== undefined) {
      const user = typeof o.user === "string" ? `${o.user}@` : "";
      const host = typeof o.host === "string" ? o.host : "localhost";
      const port = typeof o.port === "number" || typeof o.port === "string" ? `:${String(o.port)}` : "";
      const db = typeof o.database === "string" ? `/${o.database}` : "";
      target = `postgres://${user}${host}${port}${db}`;
    }
  }
  return `${target} schema=${schema}`;
}
