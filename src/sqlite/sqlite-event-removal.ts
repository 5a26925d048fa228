import { GENESIS_HASH } from "../store/event-chain.js";
import { type EventRemoval, REMOVED_EVENT, removedPayload } from "../store/event-removal.js";
import type { SqliteDatabase } from "./sqlite-database.js";

/**
 * Hollows stored events into tombstones (see src/store/event-removal.ts) in
 * the caller's write transaction: the row keeps its position, ids, version,
 * creation time and hash; its type, request context and payload are
 * replaced; its tag index rows are deleted. Returns how many were removed.
 * The freed bytes are overwritten by the store's scrub (secure_delete and a
 * checkpoint of the write-ahead log), which the retention job runs after.
 */
export function removeSqliteEvents(
  db: SqliteDatabase,
  table: string,
  tagTable: string,
  run: string,
  removals: readonly EventRemoval[],
): number {
  const read = db.statement(
    `SELECT e.domain, e.name, (SELECT p.hash FROM ${table} p WHERE p.position < e.position ORDER BY p.position DESC LIMIT 1) AS prev
       FROM ${table} e WHERE e.position = ? AND e.event_uuid = ?`,
  );
  const hollow = db.statement(
    `UPDATE ${table} SET domain = ?, name = ?, req_ctx = '{}', payload = ?, event_version = 1 WHERE position = ?`,
  );
  const removed: number[] = [];
  for (const r of [...removals].sort((a, b) => a.position - b.position)) {
    const row = read.get(r.position, r.eventUuid) as { domain: string; name: string; prev: string | null } | undefined;
    if (row === undefined || (row.domain === REMOVED_EVENT.domain && row.name === REMOVED_EVENT.name)) continue;
    const payload = removedPayload(`${row.domain}.${row.name}`, run, row.prev ?? GENESIS_HASH);
    hollow.run(REMOVED_EVENT.domain, REMOVED_EVENT.name, JSON.stringify(payload), r.position);
    removed.push(r.position);
  }
  // The tag index is keyed by tenant and tag first: one pass over it per chunk rather than one per event.
  for (let i = 0; i < removed.length; i += CHUNK) {
    const chunk = removed.slice(i, i + CHUNK);
    db.statement(`DELETE FROM ${tagTable} WHERE position IN (${chunk.map(() => "?").join(",")})`).run(...chunk);
  }
  return removed.length;
}

/** Positions per DELETE (SQLite's default limit of bound parameters is 32766). */
const CHUNK = 500;
