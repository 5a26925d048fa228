import type {
  Kysely,
  KyselyModule,
  KyselyPlugin,
  OperationNode,
  QueryResult,
  RootOperationNode,
  TableNode,
  UnknownRow,
} from "./kysely-types.js";
import { errorMessage, MnemeError } from "../model/errors.js";
import type { SqlTableAccess } from "../store/sql-table-access.js";

const KYSELY = "kysely";
/** The column of a tenant table that holds each row's tenant. */
const TENANT_COLUMN = "tenant_uuid";

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
export function sqlTableKysely<DB>(
  k: KyselyModule,
  access: SqlTableAccess,
  rename?: (table: string) => string | undefined,
  guard?: (write: KyselyWrite) => string | undefined,
): Kysely<DB> {
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
  const plugins: KyselyPlugin[] = [];
  // The guard sees the query as written (the table's own name), so it runs before the renaming.
  if (guard !== undefined) plugins.push(guardPlugin(k, guard));
  if (rename !== undefined) plugins.push(renamePlugin(k, rename, sqlite ? undefined : access.schema));
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

/** What a value of a write is when it is not a plain value (a subquery, raw SQL, a reference). */
export const NOT_A_VALUE: unique symbol = Symbol("not a value");

/** One write of a Kysely query, as its guard sees it: the table as written, the columns it sets and, for an insert, its rows' values. */
export interface KyselyWrite {
  readonly kind: "insert" | "update" | "delete";
  readonly table: string;
  readonly columns: readonly string[];
  /** An insert's rows (values by column, NOT_A_VALUE for an expression); empty for an update. */
  readonly rows: readonly (readonly unknown[])[];
}

type Node = OperationNode & Record<string, unknown>;

function nameOf(node: unknown): string | undefined {
  const n = node as Node | undefined;
  if (n === undefined) return undefined;
  if (n.kind === "TableNode") return ((n.table as Node).identifier as { name: string }).name;
  if (n.kind === "AliasNode") return nameOf(n.node);
  if (n.kind === "ColumnNode") return (n.column as { name: string }).name;
  return undefined;
}

function valueOf(node: Node): unknown {
  return node.kind === "ValueNode" ? node.value : NOT_A_VALUE;
}

/**
 * Calls `guard` with each write of a query (insert, update, an insert's ON
 * CONFLICT DO UPDATE, delete) before it is sent. When the guard answers a
 * tenant for an update or delete (a tenant table written by a writer with a
 * tenant), the statement gets `AND tenant_uuid = <tenant>`: it reaches that
 * tenant's rows only, however its own WHERE (or conflict target) is written.
 */
function guardPlugin(k: KyselyModule, guard: (write: KyselyWrite) => string | undefined): KyselyPlugin {
  // In ON CONFLICT DO UPDATE the column is named with its table (excluded has one too); the renaming that runs
  // after this plugin gives that table its generation's name.
  const own = (tenant: string, table?: string): OperationNode =>
    k.BinaryOperationNode.create(
      k.ReferenceNode.create(k.ColumnNode.create(TENANT_COLUMN), table === undefined ? undefined : k.TableNode.create(table)),
      k.OperatorNode.create("="),
      k.ValueNode.create(tenant),
    );
  return {
    transformQuery: (args: { node: RootOperationNode }) => {
      const node = args.node as unknown as Node;
      if (node.kind === "InsertQueryNode") {
        const table = nameOf(node.into) ?? "";
        const columns = ((node.columns as Node[] | undefined) ?? []).map((c) => nameOf(c) ?? "");
        const lists = ((node.values as Node | undefined)?.values as Node[] | undefined) ?? [];
        const rows = lists.map((l) =>
          l.kind === "PrimitiveValueListNode" ? (l.values as unknown[]) : ((l.values as Node[] | undefined) ?? []).map(valueOf),
        );
        guard({ kind: "insert", table, columns, rows });
        const onConflict = node.onConflict as Node | undefined;
        const updates = (onConflict?.updates as Node[] | undefined) ?? [];
        if (onConflict === undefined || updates.length === 0) return args.node;
        const tenant = guard({ kind: "update", table, columns: updates.map((u) => nameOf(u.column) ?? ""), rows: [] });
        if (tenant === undefined) return args.node;
        const held = k.OnConflictNode.cloneWithUpdateWhere(onConflict as never, own(tenant, table));
        return { ...(node as object), onConflict: held } as unknown as RootOperationNode;
      }
      let tenant: string | undefined;
      if (node.kind === "UpdateQueryNode") {
        const updates = (node.updates as Node[] | undefined) ?? [];
        tenant = guard({ kind: "update", table: nameOf(node.table) ?? "", columns: updates.map((u) => nameOf(u.column) ?? ""), rows: [] });
      } else if (node.kind === "DeleteQueryNode") {
        const froms = ((node.from as Node | undefined)?.froms as Node[] | undefined) ?? [];
        for (const from of froms) tenant ??= guard({ kind: "delete", table: nameOf(from) ?? "", columns: [], rows: [] });
      }
      return tenant === undefined ? args.node : (k.QueryNode.cloneWithWhere(node as never, own(tenant)) as unknown as RootOperationNode);
    },
    transformResult: async (args: { result: QueryResult<UnknownRow> }) => args.result,
  };
}
