/**
 * The Postgres pools and schemas of one test file: schemas get random names
 * and are dropped, pools ended, in the file's afterAll (DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/test).
 */
import pg from "pg";
import { afterAll } from "vitest";
import { newUuid } from "mneme";

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export interface PostgresScratch {
  /** The file's first pool. */
  readonly pool: pg.Pool;
  /** Another pool (several pools stand for several app instances), ended at the end of the file. */
  newPool(max?: number): pg.Pool;
  /** A fresh schema name with the given prefix, dropped at the end of the file. */
  newSchema(): string;
  /** Drops a schema now (e.g. after each contract test). */
  dropSchema(schema: string): Promise<void>;
  /** A conformance suite's factory of stores each in a fresh schema, and its cleanup (close the store, so no session holds locks; drop the schema). */
  inSchema<S extends { close(): Promise<void> }>(
    make: (schema: string) => S,
  ): { factory: () => Promise<S>; opts: { cleanup: (store: S) => Promise<void> } };
}

export function postgresScratch(prefix: string): PostgresScratch {
  const pools: pg.Pool[] = [];
  const newPool = (max = 10): pg.Pool => {
    const p = new pg.Pool({ connectionString: DATABASE_URL, max });
    p.on("error", () => {});
    pools.push(p);
    return p;
  };
  const pool = newPool();
  const schemas = new Set<string>();
  const dropSchema = async (s: string): Promise<void> => {
    await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    schemas.delete(s);
  };
  afterAll(async () => {
    for (const s of [...schemas]) await dropSchema(s).catch(() => undefined);
    await Promise.all(pools.map((p) => p.end()));
  });
  return {
    pool,
    newPool,
    newSchema: () => {
      const s = `${prefix}_${newUuid().replace(/-/g, "").slice(-16)}`;
      schemas.add(s);
      return s;
    },
    dropSchema,
    inSchema: <S extends { close(): Promise<void> }>(make: (schema: string) => S) => {
      const schemaOf = new WeakMap<object, string>();
      return {
        factory: async (): Promise<S> => {
          const s = `${prefix}_${newUuid().replace(/-/g, "").slice(-16)}`;
          schemas.add(s);
          const store = make(s);
          schemaOf.set(store, s);
          return store;
        },
        opts: {
          cleanup: async (store: S): Promise<void> => {
            await store.close();
            const s = schemaOf.get(store);
            if (s !== undefined) await dropSchema(s);
          },
        },
      };
    },
  };
}
