import type { Pool, PoolClient } from "pg";

/**
 * The few methods of a `pg.Pool` that the Postgres backends use, so a caller
 * may pass any pool-shaped object (a wrapped or instrumented pool) typed structurally.
 */
export type PgPool = Pick<Pool, "query" | "connect"> & { readonly options?: unknown };

/** A client checked out of a {@link PgPool}; `release(true)` destroys it (ends its session). */
export type PgClient = PoolClient;

/**
 * A description of where the data lives, without secrets: `postgres://user@host:port/db schema=s`.
 * The password (in the URL or in pool options) is never included.
 */
export function describeConnection(source: string | PgPool, schema: string): string {
  let target = "postgres";
  if (typeof source === "string") {
    target = redactUrl(source);
  } else {
    const o = source.options as { connectionString?: unknown; host?: unknown; port?: unknown; user?: unknown; database?: unknown } | undefined;
    if (typeof o?.connectionString === "string") target = redactUrl(o.connectionString);
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

function redactUrl(connectionString: string): string {
  try {
    const u = new URL(connectionString);
    u.password = "";
    for (const k of [...u.searchParams.keys()]) {
      if (/pass|secret|key|token/i.test(k)) u.searchParams.delete(k);
    }
    return u.toString();
  } catch {
    // Not a URL (a libpq keyword string): keep only what cannot be a secret.
    const kept = connectionString
      .split(/\s+/)
      .filter((kv) => /^(host|port|dbname|user)=/.test(kv))
      .join(" ");
    return kept === "" ? "postgres" : kept;
  }
}
