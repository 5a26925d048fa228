/**
 * The hash chain of the events table (see src/store/event-chain.ts for its
 * definition, which `mneme_chain_hash` writes in SQL): a `hash` column, a row
 * trigger that computes each inserted event's hash from the one stored just
 * before it, and `mneme_chain_from`, which recomputes the chain from a
 * position (the upgrade of a store made before the chain, and the sealing of
 * stored payloads by the personal-data migration).
 *
 * The trigger runs inside the append's ordered section: every append function
 * (of this release and of earlier ones kept for a rolling deploy) takes the
 * append lock before it inserts, and a row-level BEFORE trigger sees the rows
 * its statement inserted before (positions ascend in each INSERT), so each
 * hash follows the stored predecessor in commit order. A trigger rather than
 * a column in each append function keeps every path that inserts events,
 * including the functions of earlier releases, on the chain.
 *
 * `qschema` is the quoted schema.
 */
export function chainDdl(qschema: string): string[] {
  const s = qschema;
  const genesis = `'${"0".repeat(64)}'`;
  const hashOf = (prev: string, e: string) => chainHashSql(prev, e);
  return [
    `ALTER TABLE ${s}.events ADD COLUMN IF NOT EXISTS hash text`,
    `CREATE OR REPLACE FUNCTION ${s}.mneme_chain_hash(p_prev text, e ${s}.events) RETURNS text
      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
        SELECT ${hashOf("p_prev", "e")}
      $fn$`,
    `CREATE OR REPLACE FUNCTION ${s}.mneme_chain_event() RETURNS trigger
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_prev text;
      BEGIN
        SELECT e.hash INTO v_prev FROM ${s}.events e WHERE e.position < NEW.position ORDER BY e.position DESC LIMIT 1;
        IF NOT FOUND THEN
          v_prev := ${genesis};
        ELSIF v_prev IS NULL THEN
          RAISE EXCEPTION 'the event before position % has no hash: the store''s chain was not built (start this release on it)', NEW.position;
        END IF;
        -- The expression of mneme_chain_hash inline: a call with a row argument per inserted row costs more.
        NEW.hash := ${hashOf("v_prev", "NEW")};
        RETURN NEW;
      END
      $fn$`,
    `CREATE OR REPLACE FUNCTION ${s}.mneme_chain_from(p_from bigint) RETURNS bigint
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_prev text;
        v_n bigint := 0;
        r ${s}.events;
      BEGIN
        SELECT e.hash INTO v_prev FROM ${s}.events e WHERE e.position < p_from ORDER BY e.position DESC LIMIT 1;
        IF NOT FOUND THEN
          v_prev := ${genesis};
        END IF;
        FOR r IN SELECT e.* FROM ${s}.events e WHERE e.position >= p_from ORDER BY e.position LOOP
          v_prev := ${s}.mneme_chain_hash(v_prev, r);
          IF r.hash IS DISTINCT FROM v_prev THEN
            UPDATE ${s}.events SET hash = v_prev WHERE position = r.position;
          END IF;
          v_n := v_n + 1;
        END LOOP;
        RETURN v_n;
      END
      $fn$`,
    // A store made before the chain: computed here, in the init transaction, whose ALTER TABLE holds the table's
    // lock until it commits, so no append runs meanwhile. Every later insert passes the trigger, so only a store
    // whose newest event has no hash needs it.
    `DO $do$
      BEGIN
        IF EXISTS (SELECT 1 FROM (SELECT e.hash FROM ${s}.events e ORDER BY e.position DESC LIMIT 1) l WHERE l.hash IS NULL) THEN
          PERFORM ${s}.mneme_chain_from((SELECT min(e.position) FROM ${s}.events e WHERE e.hash IS NULL));
        END IF;
      END
      $do$`,
    // Named to fire after the other BEFORE INSERT triggers (alphabetical order): the hash covers the row as stored.
    `DROP TRIGGER IF EXISTS mneme_zz_chain ON ${s}.events`,
    `CREATE TRIGGER mneme_zz_chain BEFORE INSERT ON ${s}.events FOR EACH ROW EXECUTE FUNCTION ${s}.mneme_chain_event()`,
  ];
}

/**
 * The SQL expression of an event's hash (see src/store/event-chain.ts): `prev` the previous hash, `e` the
 * row. JSON strings as JSON.stringify writes them (to_json escapes the same characters, and ids hold no
 * lone surrogate).
 */
function chainHashSql(prev: string, e: string): string {
  const str = (col: string) => `coalesce(to_json(${e}.${col})::text, 'null')`;
  const ids = ["event_uuid", "tenant_uuid", "domain", "name", "aggregate_uuid", "command_uuid"].map(str).join(` || ',' || `);
  return `encode(sha256(convert_to(
          ${prev} || E'\\n' || ${e}.position::text || E'\\n' || '[' || ${ids} || ']' || E'\\n' ||
          ${e}.version::text || E'\\n' || ${e}.created_at::text || E'\\n' || ${e}.event_version::text || E'\\n' ||
          ${e}.req_ctx::text || E'\\n' || coalesce(${e}.payload::text, '-'), 'UTF8')), 'hex')`;
}
