import { GENESIS_HASH } from "../store/event-chain.js";
import { type EventRemoval, REMOVED_EVENT } from "../store/event-removal.js";
import type { CheckedOutClient } from "./postgres-pool.js";

/**
 * Hollows stored events into tombstones (see src/store/event-removal.ts) in
 * the caller's transaction, which holds the append lock: one UPDATE keeps
 * each row's position, ids, version, creation time and hash and replaces its
 * type, request context and payload (the tombstone's payload names the hash
 * of the row before it, unchanged by the hollowing), then its tag index rows
 * are deleted. The old row versions are gone from every read at once and
 * from the heap with the store's scrub (VACUUM), which the retention job
 * runs after. Returns how many were removed.
 */
export async function removePostgresEvents(
  client: CheckedOutClient,
  qschema: string,
  run: string,
  removals: readonly EventRemoval[],
): Promise<number> {
  const res = await client.query<{ position: string }>({
    text: `WITH target AS (
             SELECT e.position, e.domain || '.' || e.name AS type,
                    coalesce((SELECT p.hash FROM ${qschema}.events p WHERE p.position < e.position ORDER BY p.position DESC LIMIT 1), $4) AS prev
               FROM ${qschema}.events e JOIN unnest($1::bigint[], $2::text[]) AS u(pos, id) ON e.position = u.pos AND e.event_uuid = u.id
              WHERE NOT (e.domain = $5 AND e.name = $6))
           UPDATE ${qschema}.events e
              SET domain = $5, name = $6, req_ctx = '{}'::jsonb, event_version = 1,
                  payload = jsonb_build_object('type', t.type, 'reason', 'retention', 'run', $3::text, 'prevHash', t.prev)
             FROM target t WHERE e.position = t.position
           RETURNING e.position::text`,
    values: [
      removals.map((r) => r.position),
      removals.map((r) => r.eventUuid),
      run,
      GENESIS_HASH,
      REMOVED_EVENT.domain,
      REMOVED_EVENT.name,
    ],
  });
  const positions = res.rows.map((r) => r.position);
  if (positions.length > 0) {
    await client.query({ text: `DELETE FROM ${qschema}.event_tags WHERE position = ANY ($1::bigint[])`, values: [positions] });
  }
  return positions.length;
}
