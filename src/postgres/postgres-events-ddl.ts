import { SQLSTATE_NOT_IN_TENANT, SQLSTATE_VERSION_GAP, SQLSTATE_VERSION_TAKEN } from "./postgres-errors.js";
import { appendAggregateDdl } from "./postgres-append-aggregate-ddl.js";
import { chainDdl } from "./postgres-chain-ddl.js";
import { appendFlushDdl, EVENT_COLUMNS, RECORD_COLUMNS } from "./postgres-append-flush-ddl.js";
import { oldSignatureDdl } from "./postgres-old-starts.js";
import { unversionedAppends } from "./postgres-old-writers.js";

/** The parameters `mneme_append_batch` has had since group commit (the current signature adds p_event_versions). */
const BATCH_PARAMS = `
        p_lock_key bigint, p_channel text, p_note text, p_call_ends integer[],
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs text[], p_payloads text[],
        p_expected_ends integer[], p_expected_aggregates text[], p_expected_versions integer[],
        p_global_ends integer[], p_global_aggregates text[],
        p_record_uuids text[], p_record_domains text[], p_record_names text[], p_record_tenants text[],
        p_record_statuses text[], p_record_created_ats bigint[], p_records text[]`;
/** One row per call: its first position and versions, or the SQLSTATE, message and constraint of its refusal. */
const BATCH_RETURNS = `RETURNS TABLE (call_no integer, base_position bigint, versions integer[],
                     error_state text, error_message text, error_constraint text)`;

/**
 * The DDL of the event repository: the schema, the events table and its
 * sequence, the refusal of 0.1 writers, and the append functions (the current
 * ones and the signatures of earlier releases, kept for a rolling deploy).
 * `qschema` is the quoted schema, `schema` its name (for messages).
 */
export function eventsDdl(qschema: string, schema: string, admitOldWriters: boolean): string[] {
  const s = qschema;
  const seq = `${s}.events_position_seq`;
  // The head under the lock: the highest position committed (the primary key's last entry). Positions are
  // taken from the rows themselves, inside the appending transaction, so a transaction that rolls back or
  // dies before its COMMIT gives its positions back. (A sequence does not: nextval and setval are not
  // transactional.) The sequence is only kept at the head for functions of earlier releases, see below.
  const head = `SELECT coalesce(max(position), 0) FROM ${s}.events`;
  return [
    `CREATE SCHEMA IF NOT EXISTS ${s}`,
    `CREATE SEQUENCE IF NOT EXISTS ${seq} AS bigint`,
    `CREATE TABLE IF NOT EXISTS ${s}.events (
        position bigint PRIMARY KEY,
        event_uuid text NOT NULL,
        tenant_uuid text NOT NULL,
        domain text NOT NULL,
        name text NOT NULL,
        aggregate_uuid text NOT NULL,
        version integer NOT NULL CHECK (version > 0),
        command_uuid text,
        created_at bigint NOT NULL,
        req_ctx jsonb NOT NULL,
        payload jsonb NOT NULL,
        event_version integer NOT NULL DEFAULT 1 CHECK (event_version > 0),
        CONSTRAINT events_aggregate_version_key UNIQUE (aggregate_uuid, version),
        CONSTRAINT events_event_uuid_key UNIQUE (event_uuid)
      )`,
    // A schema made before event versions: every stored event is version 1.
    `ALTER TABLE ${s}.events ADD COLUMN IF NOT EXISTS event_version integer NOT NULL DEFAULT 1`,
    // The hash chain (tamper evidence): the column, its trigger, and the chain of a store made before it.
    ...chainDdl(s),
    // An append that leaves event_version out comes from 0.1, which would misread this store: refused.
    ...unversionedAppends(s, schema, admitOldWriters),
    // The helper of the signatures before event versions: only their own bodies called it, and those are replaced
    // below by bodies that call the current one. (The append functions of earlier releases are all kept: an
    // instance of an earlier release still calls its own during a rolling deploy.)
    `DROP FUNCTION IF EXISTS ${s}.mneme_append_one(bigint, text[], text[], text[], text[], text[], integer[], text[], bigint[], jsonb[], jsonb[], text[], integer[], text[])`,
    // One call's checks and writes, positions after p_base. It takes no lock: only the two functions below
    // call it, under the append lock.
    `CREATE OR REPLACE FUNCTION ${s}.mneme_append_one(
        p_base bigint,
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs jsonb[], p_payloads jsonb[],
        p_expected_aggregates text[], p_expected_versions integer[], p_global_aggregates text[], p_event_versions integer[])
      RETURNS integer[]
      LANGUAGE plpgsql VOLATILE AS $fn$
      #variable_conflict use_column
      DECLARE
        v_n integer := coalesce(cardinality(p_aggregate_uuids), 0);
        v_agg text := p_aggregate_uuids[1];
        v_owner text;
        v_cur integer;
        v_other integer;
        v_versions integer[];
        v_bad integer;
        r record;
      BEGIN
        IF v_n = 0 THEN
          RAISE EXCEPTION 'mneme_append: no events' USING ERRCODE = '22023';
        END IF;
        IF v_agg = ALL (p_aggregate_uuids) THEN
          -- One aggregate (most commands): the same rules as below, by two index lookups instead of set queries.
          IF NOT (v_agg = ANY (coalesce(p_global_aggregates, '{}'::text[]))) THEN
            SELECT f.tenant_uuid INTO v_owner FROM ${s}.events f WHERE f.aggregate_uuid = v_agg AND f.version = 1;
            IF NOT FOUND THEN
              v_owner := p_tenant_uuids[1];
            END IF;
            IF NOT (v_owner = ALL (p_tenant_uuids)) THEN
              RAISE EXCEPTION 'aggregate % was not found', v_agg USING ERRCODE = '${SQLSTATE_NOT_IN_TENANT}';
            END IF;
          END IF;
          SELECT e.version INTO v_cur FROM ${s}.events e WHERE e.aggregate_uuid = v_agg ORDER BY e.version DESC LIMIT 1;
          v_cur := coalesce(v_cur, 0);
          FOR i IN 1 .. coalesce(cardinality(p_expected_aggregates), 0) LOOP
            IF p_expected_aggregates[i] = v_agg THEN
              v_other := v_cur;
            ELSE
              v_other := NULL;
              SELECT e.version INTO v_other FROM ${s}.events e
              WHERE e.aggregate_uuid = p_expected_aggregates[i] ORDER BY e.version DESC LIMIT 1;
              v_other := coalesce(v_other, 0);
            END IF;
            IF v_other <> p_expected_versions[i] THEN
              RAISE EXCEPTION 'aggregate % is at version %, expected %', p_expected_aggregates[i], v_other, p_expected_versions[i]
                USING ERRCODE = '${SQLSTATE_VERSION_TAKEN}';
            END IF;
          END LOOP;
          FOR i IN 1 .. v_n LOOP
            v_versions := v_versions || (v_cur + i);
            IF p_versions[i] IS NOT NULL AND p_versions[i] <> v_cur + i THEN
              IF p_versions[i] < v_cur + i THEN
                RAISE EXCEPTION 'events[%]: version % of aggregate % is already taken (next is %)', i - 1, p_versions[i], v_agg, v_cur + i
                  USING ERRCODE = '${SQLSTATE_VERSION_TAKEN}';
              END IF;
              RAISE EXCEPTION 'events[%]: version % of aggregate % leaves a gap (next is %)', i - 1, p_versions[i], v_agg, v_cur + i
                USING ERRCODE = '${SQLSTATE_VERSION_GAP}';
            END IF;
          END LOOP;
        ELSE
          -- The tenant rule, before versions (a CONFLICT would tell that the aggregate exists): an aggregate
          -- belongs to the tenant of its first event, stored (version 1) or else the first of this call.
          WITH u AS (
            SELECT x.agg, x.tenant, x.ord,
                   first_value(x.tenant) OVER (PARTITION BY x.agg ORDER BY x.ord) AS call_tenant
            FROM unnest(p_aggregate_uuids, p_tenant_uuids) WITH ORDINALITY AS x(agg, tenant, ord)
            WHERE NOT (x.agg = ANY (coalesce(p_global_aggregates, '{}'::text[])))
          )
          SELECT u.agg INTO r
          FROM u LEFT JOIN ${s}.events f ON f.aggregate_uuid = u.agg AND f.version = 1
          WHERE u.tenant IS DISTINCT FROM coalesce(f.tenant_uuid, u.call_tenant)
          ORDER BY u.ord
          LIMIT 1;
          IF FOUND THEN
            RAISE EXCEPTION 'aggregate % was not found', r.agg USING ERRCODE = '${SQLSTATE_NOT_IN_TENANT}';
          END IF;

          SELECT x.agg, x.expected, coalesce(c.version, 0) AS actual INTO r
          FROM unnest(p_expected_aggregates, p_expected_versions) AS x(agg, expected)
          LEFT JOIN LATERAL (
            SELECT e.version FROM ${s}.events e WHERE e.aggregate_uuid = x.agg ORDER BY e.version DESC LIMIT 1
          ) c ON true
          WHERE coalesce(c.version, 0) <> x.expected
          LIMIT 1;
          IF FOUND THEN
            RAISE EXCEPTION 'aggregate % is at version %, expected %', r.agg, r.actual, r.expected
              USING ERRCODE = '${SQLSTATE_VERSION_TAKEN}';
          END IF;

          WITH cur AS (
            SELECT a.agg, coalesce((
              SELECT e.version FROM ${s}.events e WHERE e.aggregate_uuid = a.agg ORDER BY e.version DESC LIMIT 1
            ), 0) AS version
            FROM (SELECT DISTINCT unnest(p_aggregate_uuids) AS agg) a
          ), ranked AS (
            SELECT u.ord, u.given, (cur.version + row_number() OVER (PARTITION BY u.agg ORDER BY u.ord))::integer AS next_version
            FROM unnest(p_aggregate_uuids, p_versions) WITH ORDINALITY AS u(agg, given, ord)
            JOIN cur ON cur.agg = u.agg
          )
          SELECT array_agg(next_version ORDER BY ord),
                 min(ord) FILTER (WHERE given IS NOT NULL AND given <> next_version)
          INTO v_versions, v_bad
          FROM ranked;
          IF v_bad IS NOT NULL THEN
            IF p_versions[v_bad] < v_versions[v_bad] THEN
              RAISE EXCEPTION 'events[%]: version % of aggregate % is already taken (next is %)',
                v_bad - 1, p_versions[v_bad], p_aggregate_uuids[v_bad], v_versions[v_bad]
                USING ERRCODE = '${SQLSTATE_VERSION_TAKEN}';
            END IF;
            RAISE EXCEPTION 'events[%]: version % of aggregate % leaves a gap (next is %)',
              v_bad - 1, p_versions[v_bad], p_aggregate_uuids[v_bad], v_versions[v_bad]
              USING ERRCODE = '${SQLSTATE_VERSION_GAP}';
          END IF;
        END IF;

        INSERT INTO ${s}.events (${EVENT_COLUMNS})
        SELECT p_base + u.ord, u.event_uuid, u.tenant_uuid, u.domain, u.name, u.agg, v_versions[u.ord::integer],
               u.command_uuid, u.created_at, u.req_ctx, u.payload, coalesce(p_event_versions[u.ord::integer], 1)
        FROM unnest(p_event_uuids, p_tenant_uuids, p_domains, p_names, p_aggregate_uuids, p_command_uuids,
                    p_created_ats, p_req_ctxs, p_payloads)
             WITH ORDINALITY AS u(event_uuid, tenant_uuid, domain, name, agg, command_uuid, created_at, req_ctx, payload, ord);
        RETURN v_versions;
      END
      $fn$`,
    // One append per statement (kept for instances of an earlier version during a rolling upgrade, and for
    // hand-written tools): lock, the call, the sequence moved past it, notify.
    `CREATE OR REPLACE FUNCTION ${s}.mneme_append(
        p_lock_key bigint, p_channel text, p_note text,
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs jsonb[], p_payloads jsonb[],
        p_expected_aggregates text[], p_expected_versions integer[], p_global_aggregates text[])
      RETURNS TABLE (base_position bigint, versions integer[])
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_base bigint;
        v_versions integer[];
      BEGIN
        -- Held until this transaction's commit is visible: appends are serialised in commit order.
        PERFORM pg_advisory_xact_lock(p_lock_key);
        v_base := (${head});
        v_versions := ${s}.mneme_append_one(v_base, p_event_uuids, p_tenant_uuids, p_domains, p_names, p_aggregate_uuids,
          p_versions, p_command_uuids, p_created_ats, p_req_ctxs, p_payloads, p_expected_aggregates, p_expected_versions,
          p_global_aggregates, NULL);
        PERFORM pg_notify(p_channel, p_note || ':' || (v_base + cardinality(p_aggregate_uuids))::text);
        -- For bodies of earlier releases, which take positions from the sequence (see the batch function).
        PERFORM setval('${seq}', v_base + cardinality(p_aggregate_uuids));
        RETURN QUERY SELECT v_base, v_versions;
      END
      $fn$`,
    // Group commit: several calls in one transaction, each in a subtransaction of its own (the block with an
    // EXCEPTION clause), so each is written whole or refused whole with its own SQLSTATE. A call sees the calls
    // before it. Calls are delimited by the last index of their events (p_call_ends), expected versions and
    // global aggregates likewise; p_record_* hold each call's command record (NULL: none).
    `CREATE OR REPLACE FUNCTION ${s}.mneme_append_batch(
${BATCH_PARAMS}, p_event_versions integer[])
      ${BATCH_RETURNS}
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_head bigint;
        v_start bigint;
        v_lo integer := 1;
        v_hi integer;
        v_elo integer := 1;
        v_glo integer := 1;
        v_count integer;
        v_versions integer[];
        v_state text;
        v_msg text;
        v_constraint text;
      BEGIN
        IF coalesce(cardinality(p_call_ends), 0) = 0 THEN
          RAISE EXCEPTION 'mneme_append_batch: no calls' USING ERRCODE = '22023';
        END IF;
        -- Held until this transaction's commit is visible: appends are serialised in commit order.
        PERFORM pg_advisory_xact_lock(p_lock_key);
        v_head := (${head});
        v_start := v_head;
        FOR i IN 1 .. cardinality(p_call_ends) LOOP
          v_hi := p_call_ends[i];
          v_count := v_hi - v_lo + 1;
          v_state := NULL;
          v_msg := NULL;
          v_constraint := NULL;
          v_versions := NULL;
          BEGIN
            v_versions := ${s}.mneme_append_one(v_head,
              p_event_uuids[v_lo:v_hi], p_tenant_uuids[v_lo:v_hi], p_domains[v_lo:v_hi], p_names[v_lo:v_hi],
              p_aggregate_uuids[v_lo:v_hi], p_versions[v_lo:v_hi], p_command_uuids[v_lo:v_hi], p_created_ats[v_lo:v_hi],
              p_req_ctxs[v_lo:v_hi]::jsonb[], p_payloads[v_lo:v_hi]::jsonb[],
              coalesce(p_expected_aggregates[v_elo:p_expected_ends[i]], '{}'), coalesce(p_expected_versions[v_elo:p_expected_ends[i]], '{}'),
              coalesce(p_global_aggregates[v_glo:p_global_ends[i]], '{}'), p_event_versions[v_lo:v_hi]);
            IF p_record_uuids[i] IS NOT NULL THEN
              INSERT INTO ${s}.commands (${RECORD_COLUMNS})
              VALUES (p_record_uuids[i], p_record_domains[i], p_record_names[i], p_record_tenants[i], p_record_statuses[i],
                      p_record_created_ats[i], p_records[i]::jsonb);
            END IF;
          EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT, v_constraint = CONSTRAINT_NAME;
          END;
          call_no := i;
          error_state := v_state;
          error_message := v_msg;
          error_constraint := nullif(v_constraint, '');
          IF v_state IS NULL THEN
            base_position := v_head;
            versions := v_versions;
            v_head := v_head + v_count;
          ELSE
            base_position := NULL;
            versions := NULL;
          END IF;
          RETURN NEXT;
          v_lo := v_hi + 1;
          v_elo := p_expected_ends[i] + 1;
          v_glo := p_global_ends[i] + 1;
        END LOOP;
        IF v_head > v_start THEN
          PERFORM pg_notify(p_channel, p_note || ':' || v_head::text);
          -- The sequence is not where positions come from any more; it is kept at the head for the bodies of
          -- earlier releases, which take their positions from it (an instance of such a release that runs init()
          -- during a rolling deploy puts them back), so theirs follow ours without a collision. setval is not
          -- undone by a rollback: after a transaction that died here, the sequence is ahead until the next
          -- append of this release sets it back.
          PERFORM setval('${seq}', v_head);
        END IF;
      END
      $fn$`,
    // The signature of 0.1: kept, so that an instance of 0.1 still running during a deploy gets a clear answer
    // rather than "function does not exist"; it refuses, since 0.1 would misread this store (see
    // postgres-old-writers.ts), and its parameters refuse 0.1's init() (see postgres-old-starts.ts). (0.1's own
    // init() would put its own body back; the events table's trigger refuses that one.)
    ...oldSignatureDdl(s, schema, admitOldWriters),
    // The group commit of the release before event versions: every event of it is version 1.
    `CREATE OR REPLACE FUNCTION ${s}.mneme_append_batch(
${BATCH_PARAMS})
      ${BATCH_RETURNS}
      LANGUAGE sql VOLATILE AS $fn$
        SELECT * FROM ${s}.mneme_append_batch(p_lock_key, p_channel, p_note, p_call_ends, p_event_uuids, p_tenant_uuids,
          p_domains, p_names, p_aggregate_uuids, p_versions, p_command_uuids, p_created_ats, p_req_ctxs, p_payloads,
          p_expected_ends, p_expected_aggregates, p_expected_versions, p_global_ends, p_global_aggregates, p_record_uuids,
          p_record_domains, p_record_names, p_record_tenants, p_record_statuses, p_record_created_ats, p_records,
          NULL::integer[])
      $fn$`,
    // The append of this release (the functions above are kept for instances of earlier releases).
    // The tag index of dynamic consistency boundaries: one row per tag and one for the type of each event whose
    // type declares tags (see src/store/event-tags.ts); stores made before it get it here, empty (no event had tags).
    `CREATE TABLE IF NOT EXISTS ${s}.event_tags (
        tenant_uuid text NOT NULL,
        tag text NOT NULL,
        position bigint NOT NULL,
        CONSTRAINT event_tags_pkey PRIMARY KEY (tenant_uuid, tag, position)
      )`,
    // The tag rows of an event by its position: what a tenant move reads to carry the tags along (src/shards).
    `CREATE INDEX IF NOT EXISTS event_tags_position ON ${s}.event_tags (position)`,
    appendFlushDdl(s),
    appendFlushDdl(s, true),
    appendAggregateDdl(s),
  ];
}
