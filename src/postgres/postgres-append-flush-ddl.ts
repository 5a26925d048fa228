import { SQLSTATE_NOT_IN_TENANT, SQLSTATE_QUERY_MATCHED, SQLSTATE_VERSION_GAP, SQLSTATE_VERSION_TAKEN } from "./postgres-errors.js";

/** The events table's columns, in the order the readers map them (see `toEvent`) and the append functions insert them. */
export const EVENT_COLUMNS =
  "position, event_uuid, tenant_uuid, domain, name, aggregate_uuid, version, command_uuid, created_at, req_ctx, payload, event_version";
/** The commands table's columns the append functions write a command record into. */
export const RECORD_COLUMNS = "command_uuid, domain, name, tenant_uuid, status, created_at, record";

/** The parameters of `mneme_append_flush`, in the order of the writer's statement (see postgres-append-writer.ts). */
const FLUSH_PARAMS = `
        p_lock_key bigint, p_channel text, p_note text,
        p_call_ends integer[], p_event_calls integer[],
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs jsonb[], p_payloads jsonb[],
        p_event_versions integer[],
        p_expected_ends integer[], p_expected_calls integer[], p_expected_aggregates text[], p_expected_versions integer[],
        p_global_ends integer[], p_global_aggregates text[],
        p_record_uuids text[], p_record_domains text[], p_record_names text[], p_record_tenants text[],
        p_record_statuses text[], p_record_created_ats bigint[], p_records jsonb[]`;

/**
 * The further parameters of `mneme_append_tagged`: the tag index rows of the events (`p_tag_events[k]` is the
 * event's index in the flush, `p_tags[k]` a tag or its type row), and the append conditions per call
 * (`p_cond_ends` as `p_expected_ends`; each condition item a jsonb `{ t: tenant, a: after, d: driving rows,
 * r: further tags, y: types or null, q: query number, k: item number }`, see postgres-append-statements.ts).
 */
const TAGGED_PARAMS = `,
        p_tag_events integer[], p_tags text[], p_cond_ends integer[], p_conds jsonb[]`;

/**
 * `mneme_append_flush`: the append statement of this release for a flush of
 * several calls, or of one call on several aggregates (a lone call on one
 * aggregate takes `mneme_append_aggregate`); the functions of earlier releases
 * stay beside it (see eventsDdl). The guarantees are those of
 * `mneme_append_batch`, the function of the release before (one lock per
 * flush, positions from the head under it, the tenant rule and exact versions
 * read under it, each call written whole or refused whole with
 * its own outcome); what changed is the work per call:
 *
 * - the checks come first and refuse by returning the call's outcome row, so
 *   no call runs in a subtransaction of its own (an EXCEPTION block), and a
 *   refused call writes nothing that has to be undone;
 * - a call on one aggregate (most commands) is checked by plain comparisons
 *   against its aggregate's current version and the tenant of its version 1,
 *   read by probes of the (aggregate_uuid, version) index: for every call of
 *   the flush by one statement when no aggregate is in two calls, else by one
 *   statement per call; no array slices, no nested function call;
 * - when no aggregate is in two calls, the events and records of all accepted
 *   calls are written by one statement at the end; otherwise each call is
 *   written right after its check (in a subtransaction of its own, so that a
 *   failed write refuses it alone), and the next call sees it.
 *
 * A write the checks do not foresee (a duplicate event uuid or command
 * record, a value Postgres refuses) fails the one statement; the calls are
 * then written one by one, each in a subtransaction of its own (the EXCEPTION
 * path, kept for this rare case), so only the call at fault is refused.
 *
 * `mneme_append_tagged` runs with JIT off: its statements that unpack the
 * conditions from `jsonb` are estimated at 100 rows per array, which puts
 * their generic plans above `jit_above_cost` once the tag table holds about a
 * million rows, and the JIT compile then took 150-380 ms of a statement that
 * runs in 0.05 ms (measured by bench/dcb-flat.ts with 1M events).
 */
export function appendFlushDdl(s: string, tagged = false): string {
  return `CREATE OR REPLACE FUNCTION ${s}.${tagged ? "mneme_append_tagged" : "mneme_append_flush"}(${FLUSH_PARAMS}${tagged ? TAGGED_PARAMS : ""})
      RETURNS TABLE (call_no integer, base_position bigint, versions integer[],
                     error_state text, error_message text, error_constraint text)
      LANGUAGE plpgsql VOLATILE${tagged ? " SET jit = off" : ""} AS $fn$
      #variable_conflict use_column
      DECLARE
${DECLARATIONS}${tagged ? TAGGED_DECLARATIONS : ""}
      BEGIN
        IF v_calls = 0 OR coalesce(cardinality(p_event_calls), 0) <> p_call_ends[v_calls] THEN
          RAISE EXCEPTION 'mneme_append_flush: no calls, or p_event_calls does not match p_call_ends' USING ERRCODE = '22023';
        END IF;
        -- Held until this transaction's commit is visible: appends are serialised in commit order.
        PERFORM pg_advisory_xact_lock(p_lock_key);
        v_start := (SELECT coalesce(max(position), 0) FROM ${s}.events);${tagged ? storedMatches(s) : ""}
        v_apart := v_calls = 1;
        IF NOT v_apart THEN
          v_apart := NOT EXISTS (
            SELECT 1 FROM (
              SELECT x.call, x.agg FROM unnest(p_event_calls, p_aggregate_uuids) AS x(call, agg)
              UNION
              SELECT x.call, x.agg FROM unnest(p_expected_calls, p_expected_aggregates) AS x(call, agg)
            ) t GROUP BY t.agg HAVING count(*) > 1);
        END IF;
        IF v_apart AND v_calls > 1 THEN
          -- Calls that share no aggregate see the store as it is now: the current version and the tenant of
          -- version 1 of each call's first aggregate, for all calls by one statement.
          SELECT array_agg((SELECT e.version FROM ${s}.events e WHERE e.aggregate_uuid = c.agg ORDER BY e.version DESC LIMIT 1) ORDER BY c.i),
                 array_agg((SELECT f.tenant_uuid FROM ${s}.events f WHERE f.aggregate_uuid = c.agg AND f.version = 1) ORDER BY c.i)
            INTO v_curs, v_owners
            FROM (SELECT i, p_aggregate_uuids[coalesce(p_call_ends[i - 1], 0) + 1] AS agg FROM generate_subscripts(p_call_ends, 1) AS i) c;
        END IF;
        FOR i IN 1 .. v_calls LOOP
          v_hi := p_call_ends[i];
          v_ehi := coalesce(p_expected_ends[i], v_elo - 1);
          v_ghi := coalesce(p_global_ends[i], v_glo - 1);
          v_state := NULL;
          v_msg := NULL;
          IF v_hi >= v_lo AND (p_event_calls[v_lo] <> i OR p_event_calls[v_hi] <> i) THEN
            RAISE EXCEPTION 'mneme_append_flush: p_event_calls does not match p_call_ends' USING ERRCODE = '22023';
          END IF;
${callChecks(s)}${tagged ? conditionChecks() : ""}
          IF v_state IS NOT NULL THEN
            v_states[i] := v_state;
            v_msgs[i] := v_msg;
            v_skipped := v_skipped + greatest(v_hi - v_lo + 1, 0);
          ELSIF v_apart THEN
            v_shift[i] := v_skipped;
          ELSE
${writeAlone(s, tagged)}
          END IF;
          v_lo := v_hi + 1;
          v_elo := v_ehi + 1;
          v_glo := v_ghi + 1;${tagged ? "\n          v_clo := v_chi + 1;" : ""}
        END LOOP;
        v_events := v_lo - 1;
        IF v_apart AND v_events > v_skipped THEN
${writeAll(s, tagged)}
        END IF;
        IF v_events > v_skipped THEN
          -- One notification per flush; the sequence kept at the head for the append bodies of earlier releases.
          PERFORM pg_notify(p_channel, p_note || ':' || (v_start + v_events - v_skipped)::text),
                  setval('${s}.events_position_seq', v_start + v_events - v_skipped);
        END IF;
        v_lo := 1;
        FOR i IN 1 .. v_calls LOOP
          v_hi := p_call_ends[i];
          call_no := i;
          error_state := v_states[i];
          error_message := v_msgs[i];
          error_constraint := v_constraints[i];
          base_position := v_start + v_lo - 1 - v_shift[i];
          versions := CASE WHEN v_shift[i] IS NULL THEN NULL ELSE v_versions[v_lo:v_hi] END;
          RETURN NEXT;
          v_lo := v_hi + 1;
        END LOOP;
      END
      $fn$`;
}

/** The variables of `mneme_append_flush`. Per call: v_shift (the events of refused calls before it; NULL: refused), v_states, v_msgs, v_constraints. */
const DECLARATIONS = `
        v_calls integer := coalesce(cardinality(p_call_ends), 0);
        v_start bigint;
        v_apart boolean;
        v_records boolean := coalesce(cardinality(array_remove(p_record_uuids, NULL)), 0) > 0;
        v_shift integer[];
        v_states text[];
        v_msgs text[];
        v_constraints text[];
        v_versions integer[];
        v_skipped integer := 0;
        v_events integer;
        v_lo integer := 1;
        v_hi integer;
        v_elo integer := 1;
        v_ehi integer;
        v_glo integer := 1;
        v_ghi integer;
        v_agg text;
        v_one boolean;
        v_global boolean;
        v_cur integer;
        v_owner text;
        v_curs integer[];
        v_owners text[];
        v_other integer;
        v_call_versions integer[];
        v_bad integer;
        v_state text;
        v_msg text;
        v_constraint text;
        v_failed boolean := false;
        r record;`;

/**
 * Writes the accepted calls of a flush whose calls share no aggregate, by one statement. A lone call's
 * error ends the statement (the writer maps it). With several calls, the statement runs in a
 * subtransaction; if it fails, each call is written in a subtransaction of its own instead, so only the
 * call at fault is refused (and the positions of the calls after it close up).
 */
function writeAll(s: string, tagged: boolean): string {
  return `
          IF v_calls = 1 THEN
${writeCalls(s, "1", "1", tagged)}
          ELSE
            BEGIN
${writeCalls(s, "1", "v_calls", tagged)}
            EXCEPTION WHEN OTHERS THEN
              v_failed := true;
            END;
            IF v_failed THEN
              v_skipped := 0;
              v_lo := 1;
              FOR i IN 1 .. v_calls LOOP
                v_hi := p_call_ends[i];
                IF v_shift[i] IS NULL THEN
                  v_skipped := v_skipped + greatest(v_hi - v_lo + 1, 0);
                ELSE
${writeAlone(s, tagged)}
                END IF;
                v_lo := v_hi + 1;
              END LOOP;
            END IF;
          END IF;`;
}

/** Writes call i (events v_lo..v_hi) in a subtransaction of its own: written whole, or refused with its SQLSTATE. */
function writeAlone(s: string, tagged: boolean): string {
  return `
            v_shift[i] := v_skipped;
            BEGIN
${writeCalls(s, "i", "i", tagged)}
            EXCEPTION WHEN OTHERS THEN
              GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT, v_constraint = CONSTRAINT_NAME;
              v_states[i] := v_state;
              v_msgs[i] := v_msg;
              v_constraints[i] := nullif(v_constraint, '');
              v_shift[i] := NULL;
              v_skipped := v_skipped + (v_hi - v_lo + 1);
            END;`;
}

/** The checks of call i (events v_lo..v_hi): v_versions of its events, or v_state and v_msg of its refusal. */
function callChecks(s: string): string {
  return `
          v_agg := p_aggregate_uuids[v_lo];
          v_one := v_hi >= v_lo;
          FOR j IN v_lo + 1 .. v_hi LOOP
            IF p_aggregate_uuids[j] <> v_agg THEN
              v_one := false;
              EXIT;
            END IF;
          END LOOP;
          IF v_hi < v_lo THEN
            v_state := '22023';
            v_msg := 'mneme_append: no events';
          ELSIF v_one THEN
${oneAggregateChecks(s)}
          ELSE
${setChecks(s)}
          END IF;`;
}

/** The checks of a call whose events all belong to aggregate v_agg: one statement, then comparisons. */
function oneAggregateChecks(s: string): string {
  return `
            v_global := false;
            FOR k IN v_glo .. v_ghi LOOP
              IF p_global_aggregates[k] = v_agg THEN
                v_global := true;
              END IF;
            END LOOP;
            IF v_apart AND v_calls > 1 THEN
              v_cur := v_curs[i];
              v_owner := v_owners[i];
            ELSE
              SELECT (SELECT e.version FROM ${s}.events e WHERE e.aggregate_uuid = v_agg ORDER BY e.version DESC LIMIT 1),
                     (SELECT f.tenant_uuid FROM ${s}.events f WHERE f.aggregate_uuid = v_agg AND f.version = 1)
                INTO v_cur, v_owner;
            END IF;
            v_cur := coalesce(v_cur, 0);
            -- The tenant rule first (a CONFLICT would tell that the aggregate exists): the tenant of its stored
            -- version 1, or else of the call's first event.
            IF NOT v_global THEN
              v_owner := coalesce(v_owner, p_tenant_uuids[v_lo]);
              FOR j IN v_lo .. v_hi LOOP
                IF p_tenant_uuids[j] IS DISTINCT FROM v_owner THEN
                  v_state := '${SQLSTATE_NOT_IN_TENANT}';
                  v_msg := format('aggregate %s was not found', v_agg);
                  EXIT;
                END IF;
              END LOOP;
            END IF;
            FOR k IN v_elo .. v_ehi LOOP
              EXIT WHEN v_state IS NOT NULL;
              IF p_expected_aggregates[k] = v_agg THEN
                v_other := v_cur;
              ELSE
                v_other := coalesce((SELECT e.version FROM ${s}.events e
                                     WHERE e.aggregate_uuid = p_expected_aggregates[k] ORDER BY e.version DESC LIMIT 1), 0);
              END IF;
              IF v_other <> p_expected_versions[k] THEN
                v_state := '${SQLSTATE_VERSION_TAKEN}';
                v_msg := format('aggregate %s is at version %s, expected %s', p_expected_aggregates[k], v_other, p_expected_versions[k]);
              END IF;
            END LOOP;
            FOR j IN v_lo .. v_hi LOOP
              EXIT WHEN v_state IS NOT NULL;
              v_versions[j] := v_cur + j - v_lo + 1;
              IF p_versions[j] IS NOT NULL AND p_versions[j] <> v_versions[j] THEN
                v_bad := j;
${versionRefusal("v_versions[v_bad]")}
              END IF;
            END LOOP;`;
}

/** v_state and v_msg for a given version p_versions[v_bad] that is not `next`, the version the store assigns. */
function versionRefusal(next: string): string {
  return `
                IF p_versions[v_bad] < ${next} THEN
                  v_state := '${SQLSTATE_VERSION_TAKEN}';
                  v_msg := format('events[%s]: version %s of aggregate %s is already taken (next is %s)',
                                  v_bad - v_lo, p_versions[v_bad], p_aggregate_uuids[v_bad], ${next});
                ELSE
                  v_state := '${SQLSTATE_VERSION_GAP}';
                  v_msg := format('events[%s]: version %s of aggregate %s leaves a gap (next is %s)',
                                  v_bad - v_lo, p_versions[v_bad], p_aggregate_uuids[v_bad], ${next});
                END IF;`;
}

/**
 * The checks of a call on several aggregates, as set queries over its events (v_lo..v_hi). The arrays are
 * sliced to the call, so the planner knows how many rows each query has (a filter on the position in the
 * whole flush's arrays made it pick nested loops that ran the version probes once per event).
 */
function setChecks(s: string): string {
  return `
            WITH u AS (
              SELECT x.agg, x.tenant, x.ord,
                     first_value(x.tenant) OVER (PARTITION BY x.agg ORDER BY x.ord) AS call_tenant
              FROM unnest(p_aggregate_uuids[v_lo:v_hi], p_tenant_uuids[v_lo:v_hi]) WITH ORDINALITY AS x(agg, tenant, ord)
              WHERE NOT (x.agg = ANY (coalesce(p_global_aggregates[v_glo:v_ghi], '{}'::text[])))
            )
            SELECT u.agg INTO r
            FROM u LEFT JOIN ${s}.events f ON f.aggregate_uuid = u.agg AND f.version = 1
            WHERE u.tenant IS DISTINCT FROM coalesce(f.tenant_uuid, u.call_tenant)
            ORDER BY u.ord
            LIMIT 1;
            IF FOUND THEN
              v_state := '${SQLSTATE_NOT_IN_TENANT}';
              v_msg := format('aggregate %s was not found', r.agg);
            ELSE
              SELECT x.agg, x.expected, coalesce(c.version, 0) AS actual INTO r
              FROM unnest(p_expected_aggregates[v_elo:v_ehi], p_expected_versions[v_elo:v_ehi]) WITH ORDINALITY AS x(agg, expected, ord)
              LEFT JOIN LATERAL (
                SELECT e.version FROM ${s}.events e WHERE e.aggregate_uuid = x.agg ORDER BY e.version DESC LIMIT 1
              ) c ON true
              WHERE coalesce(c.version, 0) <> x.expected
              ORDER BY x.ord
              LIMIT 1;
              IF FOUND THEN
                v_state := '${SQLSTATE_VERSION_TAKEN}';
                v_msg := format('aggregate %s is at version %s, expected %s', r.agg, r.actual, r.expected);
              END IF;
            END IF;
            IF v_state IS NULL THEN
              WITH u AS (
                SELECT x.agg, x.given, x.ord::integer AS ord
                FROM unnest(p_aggregate_uuids[v_lo:v_hi], p_versions[v_lo:v_hi]) WITH ORDINALITY AS x(agg, given, ord)
              ), cur AS MATERIALIZED (
                SELECT a.agg, coalesce((
                  SELECT e.version FROM ${s}.events e WHERE e.aggregate_uuid = a.agg ORDER BY e.version DESC LIMIT 1
                ), 0) AS version
                FROM (SELECT DISTINCT u.agg FROM u) a
              ), ranked AS (
                SELECT u.ord, u.given, (cur.version + row_number() OVER (PARTITION BY u.agg ORDER BY u.ord))::integer AS next_version
                FROM u JOIN cur ON cur.agg = u.agg
              )
              SELECT array_agg(next_version ORDER BY ord),
                     min(ord) FILTER (WHERE given IS NOT NULL AND given <> next_version)
              INTO v_call_versions, v_bad
              FROM ranked;
              FOR j IN v_lo .. v_hi LOOP
                v_versions[j] := v_call_versions[j - v_lo + 1];
              END LOOP;
              IF v_bad IS NOT NULL THEN
                v_bad := v_bad + v_lo - 1;
${versionRefusal("v_versions[v_bad]")}
              END IF;
            END IF;`;
}

/**
 * The statement writing the events (and records) of the accepted calls from..to: positions after the head
 * read under the lock, less the events of refused calls before them (v_shift), so no position is skipped.
 */
function writeCalls(s: string, from: string, to: string, tagged: boolean): string {
  const events = `INSERT INTO ${s}.events (${EVENT_COLUMNS})
              SELECT v_start + u.ord - v_shift[u.call], u.event_uuid, u.tenant_uuid, u.domain, u.name, u.agg,
                     v_versions[u.ord::integer], u.command_uuid, u.created_at, u.req_ctx, u.payload, coalesce(u.event_version, 1)
              FROM unnest(p_event_calls, p_event_uuids, p_tenant_uuids, p_domains, p_names, p_aggregate_uuids, p_command_uuids,
                          p_created_ats, p_req_ctxs, p_payloads, p_event_versions)
                   WITH ORDINALITY AS u(call, event_uuid, tenant_uuid, domain, name, agg, command_uuid, created_at, req_ctx,
                                        payload, event_version, ord)
              WHERE u.call BETWEEN ${from} AND ${to} AND v_shift[u.call] IS NOT NULL`;
  return `
              IF v_records THEN
                WITH written AS (${events})
                INSERT INTO ${s}.commands (${RECORD_COLUMNS})
                SELECT r.uuid, r.domain, r.name, r.tenant, r.status, r.created_at, r.record
                FROM unnest(p_record_uuids, p_record_domains, p_record_names, p_record_tenants, p_record_statuses,
                            p_record_created_ats, p_records) WITH ORDINALITY AS r(uuid, domain, name, tenant, status, created_at, record, call)
                WHERE r.call BETWEEN ${from} AND ${to} AND r.uuid IS NOT NULL AND v_shift[r.call::integer] IS NOT NULL;
              ELSE
                ${events};
              END IF;${tagged ? writeTags(s, from, to) : ""}`;
}

/** The variables of `mneme_append_tagged` beside those of `mneme_append_flush`. */
const TAGGED_DECLARATIONS = `
        v_clo integer := 1;
        v_chi integer;
        v_cond jsonb;
        v_tenant text;
        v_drive text[];
        v_rest text[];
        v_types text[];
        v_pos bigint;
        v_ev integer;
        v_stored bigint[];`;

/**
 * The first stored match of every condition item of the flush (NULL: none), by one statement under the lock
 * before any call is written: an item of tenant t after position a, driven by the rows d (one tag, or the
 * types), each candidate probed for the further tags r and one of the types y by the whole key. A call's
 * conditions then read v_stored; what earlier calls of the flush write is checked from the parameters (see
 * conditionChecks). One statement instead of several per item: the checks of a flush cost a plan execution
 * each, which loaded machines felt (issue #43).
 */
function storedMatches(s: string): string {
  return `
        IF coalesce(cardinality(p_conds), 0) > 0 THEN
          v_stored := ARRAY(
            SELECT (
              SELECT t.position FROM ${s}.event_tags t
              WHERE t.tenant_uuid = c.v->>'t' AND t.tag = ANY (ARRAY(SELECT jsonb_array_elements_text(c.v->'d')))
                AND t.position > (c.v->>'a')::bigint
                AND (SELECT count(*) FROM jsonb_array_elements_text(c.v->'r') AS g(tag) WHERE (
                  SELECT 1 FROM ${s}.event_tags u WHERE u.tenant_uuid = t.tenant_uuid AND u.tag = g.tag AND u.position = t.position LIMIT 1) IS NULL) = 0
                AND (jsonb_typeof(c.v->'y') IS DISTINCT FROM 'array' OR (
                  SELECT count(*) FROM jsonb_array_elements_text(c.v->'y') AS y(tag) WHERE (
                  SELECT 1 FROM ${s}.event_tags u WHERE u.tenant_uuid = t.tenant_uuid AND u.tag = y.tag AND u.position = t.position LIMIT 1) IS NOT NULL) > 0)
              ORDER BY t.position LIMIT 1)
            FROM unnest(p_conds) WITH ORDINALITY AS c(v, k) ORDER BY c.k);
        END IF;`;
}

/**
 * The append conditions of call i (items v_clo..v_chi), after its other checks: an event of the item's tenant
 * that matches it, stored after the item's position (by the (tenant_uuid, tag, position) key of event_tags), or
 * written by a call accepted before it in this flush (all after any position a reader saw), refuses the call.
 */
function conditionChecks(): string {
  return `
          v_chi := coalesce(p_cond_ends[i], v_clo - 1);
          FOR k IN v_clo .. v_chi LOOP
            EXIT WHEN v_state IS NOT NULL;
            v_cond := p_conds[k];
            v_pos := v_stored[k];
            v_ev := NULL;
            IF v_pos IS NULL AND v_lo > 1 THEN
              v_tenant := v_cond->>'t';
              v_drive := ARRAY(SELECT jsonb_array_elements_text(v_cond->'d'));
              v_rest := ARRAY(SELECT jsonb_array_elements_text(v_cond->'r'));
              v_types := CASE WHEN jsonb_typeof(v_cond->'y') = 'array' THEN ARRAY(SELECT jsonb_array_elements_text(v_cond->'y')) END;
              SELECT x.ev INTO v_ev FROM unnest(p_tag_events, p_tags) AS x(ev, tag)
              WHERE x.ev < v_lo AND x.tag = ANY (v_drive) AND p_tenant_uuids[x.ev] = v_tenant
                AND v_shift[p_event_calls[x.ev]] IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM unnest(v_rest) AS g(tag) WHERE NOT EXISTS (
                  SELECT 1 FROM unnest(p_tag_events, p_tags) AS y(ev, tag) WHERE y.ev = x.ev AND y.tag = g.tag))
                AND (v_types IS NULL OR EXISTS (
                  SELECT 1 FROM unnest(p_tag_events, p_tags) AS y(ev, tag) WHERE y.ev = x.ev AND y.tag = ANY (v_types)))
              LIMIT 1;
            END IF;
            IF v_pos IS NOT NULL OR v_ev IS NOT NULL THEN
              v_state := '${SQLSTATE_QUERY_MATCHED}';
              v_msg := format('query %s item %s after %s at %s', v_cond->>'q', v_cond->>'k', v_cond->>'a', coalesce(v_pos::text, '-'));
            END IF;
          END LOOP;`;
}

/** The tag index rows of the accepted calls from..to, at the positions their events are written at. */
function writeTags(s: string, from: string, to: string): string {
  return `
              INSERT INTO ${s}.event_tags (tenant_uuid, tag, position)
              SELECT p_tenant_uuids[x.ev], x.tag, v_start + x.ev - v_shift[p_event_calls[x.ev]]
              FROM unnest(p_tag_events, p_tags) AS x(ev, tag)
              WHERE p_event_calls[x.ev] BETWEEN ${from} AND ${to} AND v_shift[p_event_calls[x.ev]] IS NOT NULL;`;
}
