import type { Prepared, RecordColumns } from "./postgres-append-input.js";

/** One append as the statements take it: its checked events and its command record (undefined: none). */
export interface AppendCall {
  readonly prepared: Prepared;
  readonly record: RecordColumns | undefined;
}

/** The append lock's key, the NOTIFY channel and this instance's id (the note's prefix). */
export interface AppendTarget {
  readonly lockKey: string;
  readonly channel: string;
  readonly instanceId: string;
}

/** The outcome of one call: its first position and versions, or the SQLSTATE, message and constraint of its refusal. */
export interface CallOutcome {
  base_position: string | null;
  versions: number[] | null;
  error_state: string | null;
  error_message: string | null;
  error_constraint: string | null;
}

/** The statement of `mneme_append_flush` (see postgres-append-flush-ddl.ts), one outcome row per call in call order. */
export function flushStatementText(qschema: string): string {
  return (
    "SELECT base_position::text AS base_position, versions, error_state, error_message, error_constraint " +
    `FROM ${qschema}.mneme_append_flush(` +
    "$1::bigint, $2::text, $3::text, $4::integer[], $5::integer[], " +
    "$6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::integer[], $12::text[], $13::bigint[], $14::jsonb[], $15::jsonb[], " +
    "$16::integer[], $17::integer[], $18::integer[], $19::text[], $20::integer[], $21::integer[], $22::text[], " +
    "$23::text[], $24::text[], $25::text[], $26::text[], $27::text[], $28::bigint[], $29::jsonb[]) ORDER BY call_no"
  );
}

/** The statement of `mneme_append_tagged`: `mneme_append_flush`'s, with the tag rows and conditions of its calls. */
export function taggedStatementText(qschema: string): string {
  return flushStatementText(qschema)
    .replace(".mneme_append_flush(", ".mneme_append_tagged(")
    .replace("$29::jsonb[])", "$29::jsonb[], $30::integer[], $31::text[], $32::integer[], $33::jsonb[])");
}

/** The further parameters of `mneme_append_tagged` for the calls of one flush (event indexes from 1 across the flush). */
export function taggedValues(batch: readonly AppendCall[]): unknown[] {
  const tagEvents: number[] = [];
  const tags: string[] = [];
  const condEnds: number[] = [];
  const conds: string[] = [];
  let offset = 1;
  for (const { prepared: p } of batch) {
    const t = p.tagged;
    if (t !== undefined) {
      for (const ev of t.tagEvents) tagEvents.push(ev + offset);
      tags.push(...t.tags);
      conds.push(...t.conditions);
    }
    condEnds.push(conds.length);
    offset += p.events.length;
  }
  return [tagEvents, tags, condEnds, conds];
}

/** The statement of `mneme_append_aggregate` (see postgres-append-aggregate-ddl.ts): `r` is [base position, version before]. */
export function aggregateStatementText(qschema: string): string {
  return (
    `SELECT ${qschema}.mneme_append_aggregate($1::bigint, $2::text, $3::text, $4::text, ` +
    "$5::text[], $6::text[], $7::text[], $8::text[], $9::integer[], $10::text[], $11::bigint[], $12::jsonb[], $13::jsonb[], $14::integer[], " +
    "$15::text[], $16::integer[], $17::boolean, $18::text, $19::text, $20::text, $21::text, $22::text, $23::bigint, $24::jsonb)::text[] AS r"
  );
}

/** The parameters of `mneme_append_aggregate` for a lone call whose events all belong to `prepared.aggregate`. */
export function aggregateValues(target: AppendTarget, call: AppendCall): unknown[] {
  const { prepared: p, record } = call;
  const c = p.columns;
  const agg = p.aggregate as string;
  return [
    target.lockKey,
    target.channel,
    target.instanceId,
    agg,
    c[0],
    c[1],
    c[2],
    c[3],
    p.givesVersions ? c[5] : null,
    c[6],
    c[7],
    c[8],
    c[9],
    p.eventVersions,
    p.expectedAggregates.length > 0 ? p.expectedAggregates : null,
    p.expectedAggregates.length > 0 ? p.expectedVersions : null,
    p.globalAggregates.includes(agg),
    ...(record ?? [null, null, null, null, null, null, null]),
  ];
}

/** The outcome of `mneme_append_aggregate`'s [base position, version before] for a call of `n` events. */
export function aggregateOutcome(r: readonly string[], n: number): CallOutcome {
  const before = Number(r[1]);
  const versions = new Array<number>(n);
  for (let i = 0; i < n; i++) versions[i] = before + i + 1;
  return { base_position: r[0] ?? null, versions, error_state: null, error_message: null, error_constraint: null };
}

/** The parameters of `mneme_append_flush` for the calls of one flush (see the writer's statement). */
export function flushValues(target: AppendTarget, batch: readonly AppendCall[]): unknown[] {
  const callEnds: number[] = [];
  const eventCalls: number[] = [];
  const cols: unknown[][] = Array.from({ length: 10 }, () => []);
  const eventVersions: number[] = [];
  const expEnds: number[] = [];
  const expCalls: number[] = [];
  const expAggs: string[] = [];
  const expVersions: number[] = [];
  const globalEnds: number[] = [];
  const globals: string[] = [];
  const recs: unknown[][] = Array.from({ length: 7 }, () => []);
  for (let call = 1; call <= batch.length; call++) {
    const { prepared: p, record } = batch[call - 1] as AppendCall;
    for (const v of p.eventVersions) {
      eventVersions.push(v);
      eventCalls.push(call);
    }
    for (let c = 0; c < 10; c++) {
      const target = cols[c] as unknown[];
      for (const v of p.columns[c] as unknown[]) target.push(v);
    }
    callEnds.push(eventCalls.length);
    for (const agg of p.expectedAggregates) {
      expAggs.push(agg);
      expCalls.push(call);
    }
    expVersions.push(...p.expectedVersions);
    expEnds.push(expAggs.length);
    globals.push(...p.globalAggregates);
    globalEnds.push(globals.length);
    for (let c = 0; c < 7; c++) (recs[c] as unknown[]).push(record === undefined ? null : record[c]);
  }
  return [
    target.lockKey,
    target.channel,
    target.instanceId,
    callEnds,
    eventCalls,
    ...cols,
    eventVersions,
    expEnds,
    expCalls,
    expAggs,
    expVersions,
    globalEnds,
    globals,
    ...recs,
  ];
}
