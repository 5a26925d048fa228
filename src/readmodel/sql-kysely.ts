import type { Kysely, KyselyModule, KyselyPlugin, QueryResult, RootOperationNode, TableNode, UnknownRow } from "./kysely-types.js";
import { errorMessage, MnemeError } from "../model/errors.js";
import type { SqlTableAccess } from "../store/sql-table-access.js";

const KYSELY = "kysely";

/**
 * Imports kysely, an optional peer dependency, the first time a SQL-table
 * readmodel starts. `moduleName` exists for tests.
 * @throws MnemeError INVALID_REQUEST naming the package and the install command when it is not installed.
 */
export async function loadKysely(moduleName: string = KYSELY): Promise<KyselyModule> {
  try {
    return (await import(moduleName)) as KyselyModule;
  } catch (e) {
    const code = (e as { code?: unknown } | null)?.code;
    const missing = code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND";
    throw new MnemeError(
      "INVALID_REQUEST",
      missing
        ? `a Kysely instance of a SQL-table readmodel needs ${moduleName}, which is not installed: it is an optional peer dependency of mneme. Install it: npm install ${moduleName}`
        : `a Kysely instance of a SQL-table readmodel needs ${moduleName}, which cannot be loaded: ${errorMessage(e)}. Reinstall it: npm install ${moduleName}`,
      { cause: e },
    );
  }
}

/**
 * A Kysely instance whose queries run through `access`: inside a handler's
 * batch on the batch's transaction, elsewhere on their own. Its own
 * transactions are refused (the batch's transaction is mneme's). `rename`
 * maps a table name to the one the query should use now (undefined: as
 * written); tables it maps get the access's schema on Postgres.
 * @internal
 */
export function sqlTableKysely<DB>(k: KyselyModule, access: SqlTableAccess, rename?: (table: string) => string | undefined): Kysely<DB> {
  const refuse = (): Promise<never> =>
    Promise.reject(
      new MnemeError(
        "INVALID_REQUEST",
        "kysely: transactions of a SQL-table readmodel's Kysely instance are not allowed: a handler's batch already runs in mneme's transaction, which commits with the checkpoint",
      ),
    );
  const connection = {
    async executeQuery<R>(compiled: { sql: string; parameters: readonly unknown[] }): Promise<QueryResult<R>> {
      const res = await access.execute<R>(compiled.sql, compiled.parameters);
      return res.rowCount === undefined ? { rows: res.rows } : { rows: res.rows, numAffectedRows: BigInt(res.rowCount) };
    },
    // eslint-disable-next-line require-yield
    async *streamQuery(): AsyncIterableIterator<QueryResult<never>> {
      throw new MnemeError("INVALID_REQUEST", "kysely: streaming is not supported by a SQL-table readmodel's Kysely instance");
    },
  };
  const driver = {
    init: async () => undefined,
    acquireConnection: async () => connection,
    beginTransaction: refuse,
    commitTransaction: refuse,
    rollbackTransaction: refuse,
    releaseConnection: async () => undefined,
    destroy: async () => undefined,
  };
  const sqlite = access.dialect === "sqlite";
  const plugins: KyselyPlugin[] = rename === undefined ? [] : [renamePlugin(k, rename, sqlite ? undefined : access.schema)];
  return new k.Kysely<DB>({
    dialect: {
      createAdapter: () => (sqlite ? new k.SqliteAdapter() : new k.PostgresAdapter()),
      createDriver: () => driver,
      createIntrospector: (db) => (sqlite ? new k.SqliteIntrospector(db) : new k.PostgresIntrospector(db)),
      createQueryCompiler: () => (sqlite ? new k.SqliteQueryCompiler() : new k.PostgresQueryCompiler()),
    },
    plugins,
  });
}

/** Renames unqualified table references by `rename`, and qualifies the renamed ones with `schema`. */
function renamePlugin(k: KyselyModule, rename: (table: string) => string | undefined, schema: string | undefined): KyselyPlugin {
  class Renamer extends k.OperationNodeTransformer {
    protected override transformTable(node: TableNode): TableNode {
      const t = super.transformTable(node);
      if (t.table.schema !== undefined) return t;
      const to = rename(t.table.identifier.name);
      if (to === undefined) return t;
      return schema === undefined ? k.TableNode.create(to) : k.TableNode.createWithSchema(schema, to);
    }
  }
  const renamer = new Renamer();
  return {
    transformQuery: (args: { node: RootOperationNode }) => renamer.transformNode(args.node),
    transformResult: async (args: { result: QueryResult<UnknownRow> }) => args.result,
  };
}
