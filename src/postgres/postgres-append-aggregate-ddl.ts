import { EVENT_COLUMNS, RECORD_COLUMNS } from "./postgres-append-flush-ddl.js";
import { SQLSTATE_NOT_IN_TENANT, SQLSTATE_VERSION_GAP, SQLSTATE_VERSION_TAKEN } from "./postgres-errors.js";

/**
 * `mneme_append_aggregate`: a flush of one call whose events all belong to
 * one aggregate (a sequential command, or a lone caller), the most common
 * append. Same guarantees as `mneme_append_flush`, with the least work Postgres
 * can do for them, because plpgsql pays per statement (executor start-up,
 * locks, snapshot) and per expression (set up again in every transaction):
 *
 * - one statement reads, under the lock, the head, the aggregate's current
 *   version and the tenant of its version 1 (three index probes);
 * - the checks are a few comparisons; a refusal raises its SQLSTATE, which
 *   ends the statement, since there is no other call to keep (no
 *   subtransaction);
 * - the event is written by a one-row INSERT (several events by one INSERT
 *   over the arrays), the command record by another.
 *
 * `p_versions` and `p_expected_aggregates` may be NULL (no given versions, no
 * expected versions), and are in most commands.
 */
export function appendAggregateDdl(s: string): string {
  return `CREATE OR REPLACE FUNCTION ${s}.mneme_append_aggregate(
        p_lock_key bigint, p_channel text, p_note text, p_aggregate_uuid text,
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_versions integer[],
        p_command_uuids text[], p_created_ats bigint[], p_req_ctxs jsonb[], p_payloads jsonb[], p_event_versions integer[],
        p_expected_aggregates text[], p_expected_versions integer[], p_global boolean,
        p_record_uuid text, p_record_domain text, p_record_name text, p_record_tenant text, p_record_status text,
        p_record_created_at bigint, p_record jsonb)
      RETURNS bigint[]
      LANGUAGE plpgsql VOLATILE AS $fn$
      DECLARE
        v_n integer;
        v_head bigint;
        v_cur integer;
        v_owner text;
        v_other integer;
        v_seq bigint;
      BEGIN
        -- Held until this transaction's commit is visible: appends are serialised in commit order.
        PERFORM pg_advisory_xact_lock(p_lock_key);
        SELECT (SELECT coalesce(max(h.position), 0) FROM ${s}.events h),
               (SELECT coalesce(max(e.version), 0) FROM ${s}.events e WHERE e.aggregate_uuid = p_aggregate_uuid),
               (SELECT f.tenant_uuid FROM ${s}.events f WHERE f.aggregate_uuid = p_aggregate_uuid AND f.version = 1),
               cardinality(p_event_uuids)
          INTO v_head, v_cur, v_owner, v_n;
        IF coalesce(v_n, 0) = 0 THEN
          RAISE EXCEPTION 'mneme_append_aggregate: no events' USING ERRCODE = '22023';
        END IF;
        -- The tenant rule first (a CONFLICT would tell that the aggregate exists): the tenant of its stored
        -- version 1, or else of the call's first event.
        IF p_global IS NOT TRUE AND NOT (coalesce(v_owner, p_tenant_uuids[1]) = ALL (p_tenant_uuids)) THEN
          RAISE EXCEPTION 'aggregate % was not found', p_aggregate_uuid USING ERRCODE = '${SQLSTATE_NOT_IN_TENANT}';
        END IF;
        IF p_expected_aggregates IS NOT NULL THEN
${expectedChecks(s)}
        END IF;
        IF p_versions IS NOT NULL THEN
${givenVersionChecks()}
        END IF;
${writes(s)}
        RETURN ARRAY[v_head, v_cur];
      END
      $fn$`;
}

/** Each expected version against the aggregate's current one (another aggregate's is looked up). */
function expectedChecks(s: string): string {
  return `
          FOR k IN 1 .. cardinality(p_expected_aggregates) LOOP
            IF p_expected_aggregates[k] = p_aggregate_uuid THEN
              v_other := v_cur;
            ELSE
              v_other := (SELECT coalesce(max(e.version), 0) FROM ${s}.events e WHERE e.aggregate_uuid = p_expected_aggregates[k]);
            END IF;
            IF v_other <> p_expected_versions[k] THEN
              RAISE EXCEPTION 'aggregate % is at version %, expected %', p_expected_aggregates[k], v_other, p_expected_versions[k]
                USING ERRCODE = '${SQLSTATE_VERSION_TAKEN}';
            END IF;
          END LOOP;`;
}

/** A given version must be the one the store assigns: lower is taken (CONFLICT), higher leaves a gap. */
function givenVersionChecks(): string {
  return `
          FOR j IN 1 .. v_n LOOP
            IF p_versions[j] IS NOT NULL AND p_versions[j] <> v_cur + j THEN
              IF p_versions[j] < v_cur + j THEN
                RAISE EXCEPTION 'events[%]: version % of aggregate % is already taken (next is %)',
                  j - 1, p_versions[j], p_aggregate_uuid, v_cur + j USING ERRCODE = '${SQLSTATE_VERSION_TAKEN}';
              END IF;
              RAISE EXCEPTION 'events[%]: version % of aggregate % leaves a gap (next is %)',
                j - 1, p_versions[j], p_aggregate_uuid, v_cur + j USING ERRCODE = '${SQLSTATE_VERSION_GAP}';
            END IF;
          END LOOP;`;
}

/**
 * One statement writes the events at the positions after the head, the command record (when there is
 * one), the notification and the sequence (kept at the head for the append bodies of earlier releases).
 */
function writes(s: string): string {
  const one = `INSERT INTO ${s}.events (${EVENT_COLUMNS})
          VALUES (v_head + 1, p_event_uuids[1], p_tenant_uuids[1], p_domains[1], p_names[1], p_aggregate_uuid, v_cur + 1,
                  p_command_uuids[1], p_created_ats[1], p_req_ctxs[1], p_payloads[1], coalesce(p_event_versions[1], 1))`;
  const many = `INSERT INTO ${s}.events (${EVENT_COLUMNS})
          SELECT v_head + u.ord, u.event_uuid, u.tenant_uuid, u.domain, u.name, p_aggregate_uuid, v_cur + u.ord::integer,
                 u.command_uuid, u.created_at, u.req_ctx, u.payload, coalesce(u.event_version, 1)
          FROM unnest(p_event_uuids, p_tenant_uuids, p_domains, p_names, p_command_uuids, p_created_ats, p_req_ctxs, p_payloads,
                      p_event_versions)
               WITH ORDINALITY AS u(event_uuid, tenant_uuid, domain, name, command_uuid, created_at, req_ctx, payload, event_version, ord)`;
  const record = `INSERT INTO ${s}.commands (${RECORD_COLUMNS})
          VALUES (p_record_uuid, p_record_domain, p_record_name, p_record_tenant, p_record_status, p_record_created_at, p_record)`;
  const after = `SELECT setval('${s}.events_position_seq', v_head + v_n), pg_notify(p_channel, p_note || ':' || (v_head + v_n)::text)`;
  return `
        IF p_record_uuid IS NULL THEN
          IF v_n = 1 THEN
            WITH e AS (${one}) ${after} INTO v_seq;
          ELSE
            WITH e AS (${many}) ${after} INTO v_seq;
          END IF;
        ELSIF v_n = 1 THEN
          WITH e AS (${one}), r AS (${record}) ${after} INTO v_seq;
        ELSE
          WITH e AS (${many}), r AS (${record}) ${after} INTO v_seq;
        END IF;`;
}
