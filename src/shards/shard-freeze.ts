/**
 * The write fence of a tenant move, kept in each shard's own schema: a table
 * of frozen tenants and a trigger on the events table that refuses any event
 * of a frozen tenant. The router's placement cache tells callers to wait; the
 * trigger is what makes the pause hold for every process, whatever its cache
 * says, because it runs inside the append's own transaction.
 */
import type pg from "pg";
import { advisoryKey, quoteIdent } from "../postgres/postgres-schema.js";

/** SQLSTATE of an event refused because its tenant is frozen for a move (a MnemeError STORE_ERROR's cause). */
export const SQLSTATE_TENANT_FROZEN = "MN503";

/** Words of the trigger's refusal; command records of commands it refused say them (see tenant-copy's NOT_REFUSED_BY_FREEZE). */
export const FROZEN_WORDS = "is being moved to another shard";

/**
 * The shard's frozen-tenant table, the trigger function that refuses an
 * event, and the function that fits the trigger to the table: while no tenant
 * is frozen there is no trigger; otherwise its `WHEN` lists the frozen
 * tenants, so an append of any other tenant pays one array test in the
 * executor, not a function call (the check runs under the append lock, where
 * every microsecond is paid by every command of the shard).
 */
export async function installFreeze(pool: pg.Pool, schema: string): Promise<void> {
  const s = quoteIdent(schema);
  await inLockedTransaction(pool, schema, async (client) => {
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.shard_frozen_tenants (tenant_uuid text PRIMARY KEY, frozen_at bigint NOT NULL)`);
    await client.query(
      `CREATE OR REPLACE FUNCTION ${s}.mneme_refuse_frozen_tenant() RETURNS trigger LANGUAGE plpgsql AS $fn$
       BEGIN
         RAISE EXCEPTION 'tenant % ${FROZEN_WORDS}: its writes are paused', NEW.tenant_uuid USING ERRCODE = '${SQLSTATE_TENANT_FROZEN}';
       END $fn$`,
    );
    await client.query(
      `CREATE OR REPLACE FUNCTION ${s}.mneme_fit_frozen_trigger() RETURNS void LANGUAGE plpgsql AS $fn$
       DECLARE v text[];
       BEGIN
         SELECT array_agg(tenant_uuid ORDER BY tenant_uuid) INTO v FROM ${s}.shard_frozen_tenants;
         IF v IS NULL THEN
           DROP TRIGGER IF EXISTS mneme_refuse_frozen_tenant ON ${s}.events;
         ELSE
           EXECUTE format('CREATE OR REPLACE TRIGGER mneme_refuse_frozen_tenant BEFORE INSERT ON ${s}.events FOR EACH ROW '
             'WHEN (NEW.tenant_uuid = ANY (%L::text[])) EXECUTE FUNCTION ${s}.mneme_refuse_frozen_tenant()', v);
         END IF;
       END $fn$`,
    );
    await client.query(`SELECT ${s}.mneme_fit_frozen_trigger()`);
  });
}

/** Runs `fn` in a transaction that holds the advisory lock `lock` of the schema (`mneme:shard-freeze`: installs, freezes and unfreezes of all instances in turn). */
async function inLockedTransaction(
  pool: pg.Pool,
  schema: string,
  fn: (client: pg.PoolClient) => Promise<void>,
  lock = "mneme:shard-freeze",
): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [advisoryKey(lock, schema)]);
    await fn(client);
    await client.query("COMMIT");
  } catch (e) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw e;
  } finally {
    client.release();
  }
}

/**
 * Freezes a tenant in a shard and waits out every append that passed the
 * trigger before the freeze committed: the trigger's replacement takes a lock
 * on the events table that waits for the inserts in flight, and the append
 * lock of the schema is taken once after the commit (every append holds it
 * from its checks to its commit). When this resolves, no further event of the
 * tenant can commit here.
 */
export async function freezeTenant(pool: pg.Pool, schema: string, tenantUuid: string): Promise<void> {
  const s = quoteIdent(schema);
  await inLockedTransaction(pool, schema, async (client) => {
    const res = await client.query(
      `INSERT INTO ${s}.shard_frozen_tenants (tenant_uuid, frozen_at) VALUES ($1, $2) ON CONFLICT (tenant_uuid) DO NOTHING`,
      [tenantUuid, Date.now()],
    );
    if (res.rowCount !== 0) await client.query(`SELECT ${s}.mneme_fit_frozen_trigger()`);
  });
  // Every append holds the schema's append lock from its checks to its commit: taking it once waits them out.
  await inLockedTransaction(pool, schema, () => Promise.resolve(), "mneme:events");
}

/** Lets the tenant's events in again (a move that failed its verification, or a tenant moving back). */
export async function unfreezeTenant(pool: pg.Pool, schema: string, tenantUuid: string): Promise<void> {
  const s = quoteIdent(schema);
  await inLockedTransaction(pool, schema, async (client) => {
    const res = await client.query(`DELETE FROM ${s}.shard_frozen_tenants WHERE tenant_uuid = $1`, [tenantUuid]);
    if (res.rowCount !== 0) await client.query(`SELECT ${s}.mneme_fit_frozen_trigger()`);
  });
}

/** True when `e` (or a cause of it) is the refusal of an event of a frozen tenant. */
export function isTenantFrozenError(e: unknown): boolean {
  for (let c: unknown = e, i = 0; c !== undefined && c !== null && i < 5; c = (c as { cause?: unknown }).cause, i++) {
    if ((c as { code?: unknown }).code === SQLSTATE_TENANT_FROZEN) return true;
  }
  return false;
}
