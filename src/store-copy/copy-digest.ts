import { createHash, type Hash } from "node:crypto";
import type { CopyRow, CopyTable } from "./copy-tables.js";

/**
 * JSON with object keys sorted by code point, so a document reads the same
 * from SQLite (text as written) and from Postgres (jsonb orders keys its own way).
 */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map((x) => canonicalJson(x)).join(",")}]`;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(",")}}`;
}

/** One row as the digest reads it: ints as digits, JSON canonical, blobs as hex. */
export function canonicalRow(table: CopyTable, row: CopyRow): string {
  const parts: string[] = [];
  for (let i = 0; i < table.columns.length; i++) {
    const v = row[i];
    if (v === null || v === undefined) {
      parts.push("null");
      continue;
    }
    switch (table.columns[i]?.kind) {
      case "int":
        parts.push(String(v));
        break;
      case "json":
        parts.push(canonicalJson(JSON.parse(String(v))));
        break;
      case "blob":
        parts.push(`"${Buffer.from(v as Uint8Array).toString("hex")}"`);
        break;
      default:
        parts.push(JSON.stringify(v));
    }
  }
  return `[${parts.join(",")}]\n`;
}

/** Rows and SHA-256 of one table's rows in key order, as one side holds them. */
export interface TableDigest {
  readonly rows: number;
  readonly sha256: string;
}

/** Folds a table's rows, in key order, into its {@link TableDigest}. */
export class TableDigester {
  readonly #table: CopyTable;
  readonly #hash: Hash = createHash("sha256");
  #rows = 0;

  constructor(table: CopyTable) {
    this.#table = table;
  }

  add(row: CopyRow): void {
    this.#hash.update(canonicalRow(this.#table, row));
    this.#rows++;
  }

  finish(): TableDigest {
    return { rows: this.#rows, sha256: this.#hash.digest("hex") };
  }
}

/** The digest of a whole store: SHA-256 over each table's name, rows and digest, in copy order. */
export function storeDigest(tables: readonly { readonly table: string; readonly digest: TableDigest }[]): string {
  const h = createHash("sha256");
  for (const t of tables) h.update(`${t.table} ${t.digest.rows} ${t.digest.sha256}\n`);
  return h.digest("hex");
}
