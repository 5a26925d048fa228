import { MnemeError } from "../model/errors.js";
import type { ListOptions } from "../store/readmodel-store-backend.js";
import { whereConditions } from "../store/readmodel-validation.js";

/**
 * The index columns of a top-level field, and the terms list() orders by:
 * its type rank (missing or null 0, booleans 1, numbers 2, strings 3, arrays
 * and objects 4), its number (0 unless a number) and its text (a string's
 * value, `true`/`false`, an array's or object's JSON; '' otherwise), in code
 * point order. None is NULL, so equality on all three pins a field for a
 * compound index and the next field's order follows. The field name is
 * checked (letters, digits, _) before it gets here: a literal, because an
 * expression index serves only the very same expression.
 */
export function fieldColumns(field: string): [rank: string, num: string, text: string] {
  const f = `(doc -> '${field}')`;
  return [
    `(CASE jsonb_typeof${f} WHEN 'boolean' THEN 1 WHEN 'number' THEN 2 WHEN 'string' THEN 3 WHEN 'array' THEN 4 WHEN 'object' THEN 4 ELSE 0 END)`,
    `(CASE WHEN jsonb_typeof${f} = 'number' THEN ${f}::numeric ELSE 0 END)`,
    `(CASE WHEN jsonb_typeof${f} IN ('boolean', 'string', 'array', 'object') THEN doc ->> '${field}' ELSE '' END) COLLATE "C"`,
  ];
}

/**
 * Equality filters as terms on a field's three index columns, the values as
 * parameters; typed (1 matches neither "1" nor true): a string is rank 3,
 * number 0 and its text; a number rank 2, itself and ''; a boolean rank 1, 0
 * and 'true'/'false'.
 */
export function whereSql(where: ListOptions["where"], values: unknown[]): string {
  let sql = "";
  for (const [f, v] of whereConditions(where)) {
    const [rank, num, text] = fieldColumns(f);
    const r = typeof v === "string" ? 3 : typeof v === "number" ? 2 : 1;
    const n = typeof v === "number" ? `$${values.push(v)}::numeric` : "0";
    const t = typeof v === "number" ? "''" : `$${values.push(String(v))}::text`;
    sql += ` AND ${rank} = ${r} AND ${num} = ${n} AND ${text} = ${t}`;
  }
  return sql;
}

/** An SQL string literal of `text`, right whatever standard_conforming_strings is (E'' with backslashes doubled when it has any). */
export function pgStringLiteral(text: string): string {
  if (text.includes("\0")) throw new MnemeError("INVALID_REQUEST", "a collection name must not contain NUL");
  const quoted = text.replace(/'/g, "''");
  return text.includes("\\") ? ` E'${quoted.replace(/\\/g, "\\\\")}'` : `'${quoted}'`;
}
