/**
 * The tables `mneme store copy` carries, named as the SQLite and Postgres
 * stores name them, with the column kinds a copy converts between. A table
 * the stores keep that is not here is left out on purpose; docs/scaling.md
 * ("What the copy leaves out") gives the reason for each.
 */

/** How a column is read, written and digested on both sides. */
export type ColumnKind = "int" | "text" | "json" | "blob";

/** One column: its name (in SQLite when the two differ) and kind. */
export interface CopyColumn {
  readonly name: string;
  readonly kind: ColumnKind;
  /** The column's name in Postgres, when it is not `name`. */
  readonly pgName?: string;
}

/** One table: its name without prefix or schema, its columns, and the key that orders it. */
export interface CopyTable {
  readonly name: string;
  readonly columns: readonly CopyColumn[];
  /** Indexes into `columns`: the primary key, whose order both sides read and write in (text by code point). */
  readonly key: readonly number[];
}

const int = (name: string): CopyColumn => ({ name, kind: "int" });
const text = (name: string): CopyColumn => ({ name, kind: "text" });
const json = (name: string): CopyColumn => ({ name, kind: "json" });

/** The store format record: one row, written to the target last (over the record its init wrote). */
export const STORE_FORMAT_TABLE: CopyTable = {
  name: "store_format",
  columns: [int("id"), int("format"), int("lowest_writer_format"), text("upgraded_by"), int("upgraded_at")],
  key: [0],
};

/** The readmodel checkpoints: the copy leaves out those of SQL-table readmodels (their tables are not copied). */
export const CHECKPOINTS_TABLE: CopyTable = {
  name: "readmodel_checkpoints",
  columns: [text("handler"), int("position")],
  key: [0],
};

/** The tables copied row by row, in this order (events first: the bulk, and what a reader checks first). */
export const COPY_TABLES: readonly CopyTable[] = [
  {
    name: "events",
    columns: [
      int("position"),
      text("event_uuid"),
      text("tenant_uuid"),
      text("domain"),
      text("name"),
      text("aggregate_uuid"),
      int("version"),
      text("command_uuid"),
      int("created_at"),
      json("req_ctx"),
      json("payload"),
      int("event_version"),
    ],
    key: [0],
  },
  // The tag index of the events (dynamic consistency boundaries, docs/dcb.md): without it no query finds them.
  { name: "event_tags", columns: [text("tenant_uuid"), text("tag"), int("position")], key: [0, 1, 2] },
  {
    name: "commands",
    columns: [text("command_uuid"), text("domain"), text("name"), text("tenant_uuid"), text("status"), int("created_at"), json("record")],
    key: [0],
  },
  {
    name: "snapshots",
    columns: [
      text("domain"),
      text("aggregate"),
      text("aggregate_uuid"),
      int("snapshot_version"),
      int("version"),
      text("tenant_uuid"),
      json("state"),
      int("created_at"),
      text("digest"),
    ],
    key: [0, 1, 2, 3],
  },
  { name: "subject_keys", columns: [text("subject"), text("key_id"), { name: "key", kind: "blob" }, int("created_at")], key: [0] },
  { name: "forgotten_keys", columns: [text("key_id"), int("forgotten_at")], key: [0] },
  // The DataStore's blobs (the CacheStore's entries are left out: see docs/scaling.md).
  {
    name: "data",
    columns: [text("key"), { name: "data", kind: "blob" }, int("size"), text("content_type"), int("created_at"), int("updated_at")],
    key: [0],
  },
  {
    name: "readmodel_documents",
    columns: [text("collection"), text("key"), json("doc"), int("updated_at"), text("tenant_uuid")],
    key: [0, 1],
  },
  { name: "readmodel_collections", columns: [{ name: "name", kind: "text", pgName: "collection" }], key: [0] },
  CHECKPOINTS_TABLE,
  {
    name: "logs",
    columns: [int("id"), text("level"), text("message"), text("source"), text("tenant_uuid"), json("data"), int("created_at")],
    key: [0],
  },
];

/** The table in which a target records the copy under way (its source, and whether it finished). */
export const COPY_MARKER_TABLE = "store_copy";

/** The table in which a target records, per copied table, how far the copy got (see CopyTableProgress). */
export const COPY_PROGRESS_TABLE = "store_copy_progress";

/** The key store's tables: a key id in `forgotten` must never be in `keys` (the forget's tombstone wins). */
export const KEY_TABLES = { keys: "subject_keys", forgotten: "forgotten_keys" } as const;

/** The table in which SQL-table readmodels record their served generation (see SqlTableReadmodel). */
export const SQL_TABLE_GENERATIONS = "sql_table_generations";

/** A row as both sides exchange it: ints as decimal strings, JSON as text, blobs as bytes. */
export type CopyRow = (string | Uint8Array | null)[];
