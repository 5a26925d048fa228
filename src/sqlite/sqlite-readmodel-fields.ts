import type { ListOptions } from "../store/readmodel-store-backend.js";
import { whereConditions } from "../store/readmodel-validation.js";

/**
 * The JSON path of a top-level field as an SQL literal; quoted so a name of
 * digits is a key, not an index. Field names are checked (letters, digits, _)
 * before they get here, so the literal needs no escaping. Literals, not
 * parameters: an expression index is used only for the very same expression.
 */
function jsonPath(field: string): string {
  return `'$."${field}"'`;
}

/**
 * The type rank of a field, as the order of mixed types wants it: missing or
 * null 0, booleans 1, numbers 2, strings 3, arrays and objects 4.
 * (json_extract alone would sort booleans among the numbers as 0/1.)
 */
export function rankSql(field: string): string {
  return (
    `CASE json_type(doc, ${jsonPath(field)}) WHEN 'true' THEN 1 WHEN 'false' THEN 1 WHEN 'integer' THEN 2 WHEN 'real' THEN 2 ` +
    `WHEN 'text' THEN 3 WHEN 'array' THEN 4 WHEN 'object' THEN 4 ELSE 0 END`
  );
}

/** The value of a field (true and false as 1 and 0, arrays and objects as JSON text). */
export function valueSql(field: string): string {
  return `json_extract(doc, ${jsonPath(field)})`;
}

/**
 * The index columns of a field: its rank, then its value. `where` equality
 * and `orderBy` are written on the same two expressions, so an index on them
 * serves both (see {@link whereClause} and {@link orderSql}).
 */
export function fieldColumns(field: string): string {
  return `${rankSql(field)}, ${valueSql(field)}`;
}

/**
 * The ORDER BY of list(): by key, or by a field's rank, then value, then key,
 * as the memory backend orders: missing/null < booleans < numbers < strings <
 * arrays/objects. `orderBy` is a checked field name (the whitelist that keeps
 * paths to one top-level field).
 */
export function orderSql(orderBy: string | undefined, descending: boolean | undefined): string {
  const dir = descending === true ? "DESC" : "ASC";
  if (orderBy === undefined) return `key ${dir}`;
  return `${rankSql(orderBy)} ${dir}, ${valueSql(orderBy)} ${dir}, key ${dir}`;
}

/**
 * Equality filters on top-level fields as SQL, the values as parameters.
 * The type rank pins the JSON type too, so `{ n: 1 }` does not match `"1"` or
 * `true` (json_extract gives 1 for true): a string is rank 3, a number 2, a
 * boolean 1 with the value 1 or 0. Both terms are equalities on an index's
 * columns (rank, value), so a compound index serves the filter and then the order.
 */
export function whereClause(where: ListOptions["where"]): { sql: string; params: unknown[] } {
  let sql = "";
  const params: unknown[] = [];
  for (const [field, value] of whereConditions(where)) {
    const rank = typeof value === "string" ? 3 : typeof value === "number" ? 2 : 1;
    sql += ` AND ${rankSql(field)} = ${rank} AND ${valueSql(field)} = ?`;
    params.push(typeof value === "boolean" ? (value ? 1 : 0) : value);
  }
  return { sql, params };
}
