/**
 * An online tenant move between two shards. Phases, each recorded in the
 * control store so that a mover killed anywhere can be run again and end in
 * the same state:
 *
 * 1. copying: the tenant's events (new positions, same versions and uuids),
 *    command records and keys are copied while the tenant keeps writing to its
 *    source; the target's readmodels build the tenant's documents from the
 *    copied events as they land.
 * 2. paused: the placement says paused (routers hold the tenant's commands),
 *    the source freezes the tenant (its trigger refuses the tenant's events,
 *    and the mover waits out appends in flight), the tail is copied, and the
 *    events, records, snapshots and keys are verified by counts and digests.
 *    A difference unfreezes the source and fails the move: nothing switches.
 *    Then the tenant's readmodel documents are compared between the shards
 *    once both shards' handlers caught up.
 * 3. switched: the placement names the target, active; routers resume there.
 * 4. done. The source keeps its frozen copy (see docs/scaling.md).
 */
import type pg from "pg";
import { isMnemeError, MnemeError } from "../model/errors.js";
import { mapPgError } from "../postgres/postgres-errors.js";
import { PostgresEventRepository } from "../postgres/postgres-event-repository.js";
import { PG, requireDriver } from "../store/driver.js";
import { type ChainHead, verifyEventChain } from "../store/event-chain.js";
import { type MoveRecord, PlacementStore } from "./placement-store.js";
import { freezeTenant, unfreezeTenant } from "./shard-freeze.js";
import type { ShardLocation } from "./shard-location.js";
import {
  commandsDigest,
  copyCommands,
  copyEvents,
  copyKeys,
  copySnapshots,
  documentsDigests,
  eventsDigest,
  handlersBehind,
  headOf,
  holdsTenant,
  keysDigest,
  refuseArchived,
  type ShardSide,
  type SideDigest,
  snapshotsDigest,
  tenantHead,
  type TenantScope,
} from "./tenant-copy.js";

/** Options of {@link moveTenant}. */
export interface TenantMoveOptions {
  readonly control: { readonly connectionString: string; readonly schema: string };
  readonly shards: readonly ShardLocation[];
  /** Domains that stay in the home shard (not copied). */
  readonly homeDomains: readonly string[];
  readonly tenantUuid: string;
  /** The target shard's name. */
  readonly to: string;
  /** Events per page of the copy. Default 5,000. */
  readonly pageSize?: number;
  /** How long the mover waits, before the pause, for the target's readmodels to follow the bulk copy. Default 30,000 ms. */
  readonly handlerWaitMs?: number;
  /** How long the mover waits, in the pause, for both shards' readmodels before comparing documents (else it leaves them uncompared). Default 1,000 ms. */
  readonly catchUpMs?: number;
  /** Called after each page and phase (a progress display, or a test that kills the mover at a point of progress). */
  readonly onProgress?: (p: TenantMoveProgress) => void;
}

export interface TenantMoveProgress {
  readonly phase: MoveRecord["phase"];
  /** Events appended to the target by this run so far. */
  readonly copied: number;
  /** The source position up to which the tenant's events are in the target. */
  readonly copiedThrough: number;
}

/** One part of the copy as the verification read it on both sides (equal, or the move failed). */
export interface VerifiedPart {
  /** events, commands, snapshots or keys. */
  readonly what: string;
  /** `before the pause` (the bulk, verified while the tenant still wrote) or `in the pause` (the rest). */
  readonly when: "before the pause" | "in the pause";
  readonly source: SideDigest;
  readonly target: SideDigest;
}

/** What a move did and found. */
export interface TenantMoveReport {
  readonly tenantUuid: string;
  readonly from: string;
  readonly to: string;
  /** True when this run continued a move an earlier run began. */
  readonly resumed: boolean;
  /** Events appended to the target by this run. */
  readonly copied: number;
  /** The parts verified by this run (none when it found the move switched already). */
  readonly verified: readonly VerifiedPart[];
  /** Collections whose documents of the tenant were compared (equal in both shards), and those left out with the reason. */
  readonly documents: { readonly compared: readonly string[]; readonly notCompared: readonly { collection: string; reason: string }[] };
  /** How long the tenant's writes were paused by this run (0 when it found the move switched already). */
  readonly pausedMs: number;
  readonly durationMs: number;
  /**
   * The hash chains this run verified (absent when it found the move switched already): the source's up to
   * the last event copied (what the copy read is what was stored), and the target's own, with the copied
   * events at their new positions, up to its head after the copy.
   */
  readonly chains?: { readonly source: ChainHead; readonly target: ChainHead };
}

interface MoveContext {
  readonly opts: TenantMoveOptions;
  readonly store: PlacementStore;
  readonly source: ShardSide;
  readonly target: ShardSide;
  readonly targetEvents: PostgresEventRepository;
  readonly sourceEvents: PostgresEventRepository;
  readonly scope: TenantScope;
  readonly pageSize: number;
  readonly keyIds: Set<string>;
  readonly verified: VerifiedPart[];
  copied: number;
  copiedThrough: number;
  documents?: TenantMoveReport["documents"];
  /** The chains' links this run recomputed (see checkChains). */
  chains?: { source: ChainHead; target: ChainHead };
}

/**
 * Moves a tenant to another shard online (its writes paused for the final
 * catch-up only). Run again after a crash, it continues the same move; run
 * after it finished, it reports again. CONFLICT when another move of the
 * tenant is under way or the target holds the tenant's events from elsewhere.
 */
export async function moveTenant(opts: TenantMoveOptions): Promise<TenantMoveReport> {
  const t0 = Date.now();
  const pools: pg.Pool[] = [];
  const { Pool } = requireDriver<typeof pg>(PG);
  const open = (connectionString: string): pg.Pool => {
    const p = new Pool({ connectionString, max: 4 });
    p.on("error", () => undefined);
    pools.push(p);
    return p;
  };
  try {
    const store = new PlacementStore(open(opts.control.connectionString), opts.control.schema);
    await store.init();
    const { move, resumed } = await beginOrResume(store, opts, (name) => locate(opts, name), open);
    const source = side(locate(opts, move.fromShard), open);
    const target = side(locate(opts, move.toShard), open);
    await refuseArchived(source, "source");
    await refuseArchived(target, "target");
    const targetEvents = new PostgresEventRepository({ pool: target.pool, schema: target.schema, pollIntervalMs: 0 });
    const sourceEvents = new PostgresEventRepository({ pool: source.pool, schema: source.schema, pollIntervalMs: 0 });
    const ctx: MoveContext = {
      opts,
      store,
      source,
      target,
      targetEvents,
      sourceEvents,
      scope: { tenantUuid: opts.tenantUuid, homeDomains: opts.homeDomains },
      pageSize: opts.pageSize ?? 5000,
      keyIds: new Set(),
      verified: [],
      copied: 0,
      copiedThrough: move.copiedThrough,
    };
    try {
      const pausedMs = ["copying", "paused", "failed"].includes(move.phase) ? await copyAndSwitch(ctx) : 0;
      return await finish(ctx, move, resumed, pausedMs, t0);
    } finally {
      await targetEvents.close().catch(() => undefined);
      await sourceEvents.close().catch(() => undefined);
    }
  } catch (e) {
    throw moveFailure(e, opts.tenantUuid);
  } finally {
    await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
  }
}

/** An error of the caller's onProgress, carried out of the move to be thrown as it is. */
class ProgressFailure extends Error {
  constructor(readonly failure: unknown) {
    super("onProgress failed");
  }
}

/**
 * What a stopped move throws: the caller's own error from onProgress as it
 * is, a MnemeError as it is, and anything else (a driver error of any step: a
 * lost connection, a deadlock, a statement the database refused) as the
 * MnemeError of mapPgError, saying that a rerun resumes the move.
 */
function moveFailure(e: unknown, tenantUuid: string): unknown {
  if (e instanceof ProgressFailure) return e.failure;
  if (isMnemeError(e)) return e;
  return mapPgError(e, `tenant move of ${tenantUuid} stopped (run it again to resume)`);
}

function locate(opts: TenantMoveOptions, name: string): ShardLocation {
  const s = opts.shards.find((x) => x.name === name);
  if (s === undefined) throw new MnemeError("INVALID_STATE", `tenant move: shard ${JSON.stringify(name)} is not one of the shards given`);
  return s;
}

function side(location: ShardLocation, open: (cs: string) => pg.Pool): ShardSide {
  return { pool: open(location.connectionString), schema: location.schema };
}

async function beginOrResume(
  store: PlacementStore,
  opts: TenantMoveOptions,
  shardOf: (name: string) => ShardLocation,
  open: (connectionString: string) => pg.Pool,
): Promise<{ move: MoveRecord; resumed: boolean }> {
  const { tenantUuid, to } = opts;
  shardOf(to);
  const placement = await store.get(tenantUuid);
  if (placement === undefined) throw new MnemeError("NOT_FOUND", `tenant ${tenantUuid} is placed on no shard`);
  const move = await store.move(tenantUuid);
  const unfinished =
    move !== undefined && (["copying", "paused", "switched"].includes(move.phase) || (move.phase === "failed" && move.toShard === to));
  if (move !== undefined && unfinished) {
    if (move.toShard !== to)
      throw new MnemeError("CONFLICT", `a move of tenant ${tenantUuid} to shard ${move.toShard} is under way; run it again to finish it`);
    return { move, resumed: true };
  }
  if (placement.shard === to) {
    if (move?.phase === "done" && move.toShard === to) return { move, resumed: true };
    throw new MnemeError("INVALID_REQUEST", `tenant ${tenantUuid} is on shard ${to} already`);
  }
  const target = shardOf(to);
  // A pool of the move's own (ended with the others, its idle clients' errors listened to).
  if (await holdsTenant({ pool: open(target.connectionString), schema: target.schema }, { tenantUuid, homeDomains: opts.homeDomains })) {
    throw new MnemeError(
      "CONFLICT",
      `shard ${to} holds events of tenant ${tenantUuid} already (an earlier copy): a move needs a target without them`,
    );
  }
  return { move: await store.startMove(tenantUuid, placement.shard, to), resumed: false };
}

function progress(ctx: MoveContext, phase: MoveRecord["phase"]): void {
  try {
    ctx.opts.onProgress?.({ phase, copied: ctx.copied, copiedThrough: ctx.copiedThrough });
  } catch (e) {
    throw new ProgressFailure(e);
  }
}

/** Copies the events from copiedThrough on, recording progress after each page. */
async function copyEventsFrom(ctx: MoveContext, phase: MoveRecord["phase"]): Promise<number> {
  const r = await copyEvents(
    ctx.source,
    ctx.targetEvents,
    ctx.target,
    ctx.scope,
    ctx.copiedThrough,
    ctx.pageSize,
    async (last, n, keyIds) => {
      await copyKeys(ctx.source, ctx.target, keyIds);
      for (const k of keyIds) ctx.keyIds.add(k);
      ctx.copied += n;
      ctx.copiedThrough = last;
      await ctx.store.setCopiedThrough(ctx.scope.tenantUuid, last);
      progress(ctx, phase);
    },
  );
  return r.pages;
}

/**
 * Command records created this long (ns) before the bulk copy of the records
 * began are verified before the pause; the later ones are copied again and
 * verified in it. A record is created when its command begins and written
 * when it commits: one that ran longer than this is found by the verification,
 * and all records are copied once more.
 */
const RECENT_RECORDS_NS = 10e9;

/**
 * Phase copying: the bulk of the events, every record and their keys, the
 * target's readmodels given time to follow, and the bulk verified. Resolves
 * the marks the pause's verification starts from.
 */
async function copyBulk(ctx: MoveContext): Promise<{ sourceMark: number; targetMark: number; recordsFrom: number }> {
  // The records first, so that a process manager or reactor of the target that reacts to a copied event finds
  // the record of the command it sends (a replay) where the source's had sent it already.
  const before = Date.now() * 1e6 - RECENT_RECORDS_NS;
  await copyKeysOf(ctx, await copyCommands(ctx.source, ctx.target, ctx.scope, 0, ctx.pageSize));
  // Until a pass finds at most one page (the rest is the tail the pause copies).
  while ((await copyEventsFrom(ctx, "copying")) > 1);
  const recordsFrom = Date.now() * 1e6 - RECENT_RECORDS_NS;
  await copyKeysOf(ctx, await copyCommands(ctx.source, ctx.target, ctx.scope, before, ctx.pageSize));
  await waitCaughtUp(ctx.target, ctx.opts.handlerWaitMs ?? 30_000);
  const sourceMark = ctx.copiedThrough;
  const targetMark = await tenantHead(ctx.target, ctx.scope);
  await check(
    ctx,
    "before the pause",
    [
      ["events", (s) => eventsDigest(s, ctx.scope, { through: s === ctx.source ? sourceMark : targetMark })],
      ["commands", (s) => commandsDigest(s, ctx.scope, { through: recordsFrom - 1 })],
    ],
    true,
  );
  await checkChains(ctx, "before the pause");
  return { sourceMark, targetMark, recordsFrom };
}

/** Phases copying and paused; resolves how long the tenant's writes were paused. */
async function copyAndSwitch(ctx: MoveContext): Promise<number> {
  const { store, scope } = ctx;
  const tenant = scope.tenantUuid;
  const move = (await store.move(tenant))!;
  const marks = await copyBulk(ctx);
  const pausedAt = Date.now();
  await store.update(tenant, move.fromShard, "paused", "paused");
  progress(ctx, "paused");
  await freezeTenant(ctx.source.pool, ctx.source.schema, tenant, scope.homeDomains);
  await copyEventsFrom(ctx, "paused");
  await copyKeysOf(ctx, await copyCommands(ctx.source, ctx.target, scope, marks.recordsFrom, ctx.pageSize));
  await copySnapshots(ctx.source, ctx.target, scope);
  const keyIds = [...ctx.keyIds];
  await check(
    ctx,
    "in the pause",
    [
      ["events", (s) => eventsDigest(s, ctx.scope, { after: s === ctx.source ? marks.sourceMark : marks.targetMark })],
      ["commands", (s) => commandsDigest(s, ctx.scope, { after: marks.recordsFrom - 1 })],
      ["snapshots", (s) => snapshotsDigest(s, ctx.scope)],
      ["keys", (s) => keysDigest(s, keyIds)],
    ],
    true,
  );
  await checkChains(ctx, "in the pause");
  await unfreezeTenant(ctx.target.pool, ctx.target.schema, tenant);
  ctx.documents = await compareDocuments(ctx);
  await store.update(tenant, move.toShard, "active", "switched");
  const pausedMs = Date.now() - pausedAt;
  progress(ctx, "switched");
  return pausedMs;
}

/**
 * Verifies the hash chains: the source's up to the last event copied (so the copy read what was stored),
 * the target's up to its head (its own chain over the copied events at their new positions). Before the
 * pause from the first event; in the pause from the links recomputed before it, so the pause reads only
 * what was appended since. A broken chain fails the move (INVALID_STATE naming the shard and the
 * position) and nothing switches.
 */
async function checkChains(ctx: MoveContext, when: VerifiedPart["when"]): Promise<void> {
  const targetHead = await headOf(ctx.target);
  const [source, target] = await Promise.all([
    verifyEventChain(ctx.sourceEvents, {
      batchSize: ctx.pageSize,
      untilPosition: ctx.copiedThrough,
      ...(ctx.chains === undefined ? {} : { from: ctx.chains.source }),
    }),
    verifyEventChain(ctx.targetEvents, {
      batchSize: ctx.pageSize,
      untilPosition: targetHead,
      ...(ctx.chains === undefined ? {} : { from: ctx.chains.target }),
    }),
  ]);
  if (source.ok && target.ok) {
    ctx.chains = { source: source.head, target: target.head };
    return;
  }
  await failMove(ctx);
  const [shard, broken] = source.ok ? [ctx.opts.to, target] : ["the source", source];
  throw new MnemeError(
    "INVALID_STATE",
    `tenant move of ${ctx.scope.tenantUuid}: the hash chain of ${shard} is broken at position ${broken.ok ? 0 : broken.position} ` +
      `(${when}; ${broken.ok ? "" : broken.reason}); nothing switched`,
  );
}

async function copyKeysOf(ctx: MoveContext, keyIds: readonly string[]): Promise<void> {
  await copyKeys(ctx.source, ctx.target, keyIds);
  for (const k of keyIds) ctx.keyIds.add(k);
}

/** Waits (at most `ms`) until every handler checkpoint of the shard is at its head; resolves those still behind. */
async function waitCaughtUp(side: ShardSide, ms: number): Promise<string[]> {
  const head = await headOf(side);
  const end = Date.now() + ms;
  for (;;) {
    const behind = await handlersBehind(side, head);
    if (behind.length === 0 || Date.now() >= end) return behind;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Reads each part's digest on both sides and records it. Command records that
 * differ (a command that ran long, a failed attempt the source cleared and ran
 * again) are copied all again once, when `recopy`, and read again. A
 * difference left fails the move (the source unfrozen, the placement active
 * on the source, the move `failed`; running it again resumes it) with
 * INVALID_STATE naming the parts, and nothing switches.
 */
async function check(
  ctx: MoveContext,
  when: VerifiedPart["when"],
  parts: readonly [string, (s: ShardSide) => Promise<SideDigest>][],
  recopy: boolean,
): Promise<void> {
  const differ: string[] = [];
  for (const [what, fn] of parts) {
    let [source, target] = await Promise.all([fn(ctx.source), fn(ctx.target)]);
    if (what === "commands" && recopy && (source.rows !== target.rows || source.md5 !== target.md5)) {
      await copyKeysOf(ctx, await copyCommands(ctx.source, ctx.target, ctx.scope, 0, ctx.pageSize));
      [source, target] = await Promise.all([fn(ctx.source), fn(ctx.target)]);
    }
    ctx.verified.push({ what, when, source, target });
    if (source.rows !== target.rows || source.md5 !== target.md5) differ.push(what);
  }
  if (differ.length === 0) return;
  await failMove(ctx);
  throw new MnemeError(
    "INVALID_STATE",
    `tenant move of ${ctx.scope.tenantUuid}: ${differ.join(", ")} differ between the shards (${when}); nothing switched`,
    {
      details: differ.map((what) => ({ message: `${what} differ` })),
    },
  );
}

async function failMove(ctx: MoveContext): Promise<void> {
  const tenant = ctx.scope.tenantUuid;
  await unfreezeTenant(ctx.source.pool, ctx.source.schema, tenant);
  const move = (await ctx.store.move(tenant))!;
  await ctx.store.update(tenant, move.fromShard, "active", "failed");
}

/**
 * In the pause, once both shards' handlers caught up (at most `catchUpMs`):
 * the tenant's documents of each collection of the source, compared with the
 * target's. A difference fails the move; handlers still behind leave the
 * documents uncompared (they follow from the verified events).
 */
async function compareDocuments(ctx: MoveContext): Promise<TenantMoveReport["documents"]> {
  const wait = ctx.opts.catchUpMs ?? 1000;
  const [srcBehind, tgtBehind] = await Promise.all([waitCaughtUp(ctx.source, wait), waitCaughtUp(ctx.target, wait)]);
  const [src, tgt] = await Promise.all([
    documentsDigests(ctx.source, ctx.scope.tenantUuid),
    documentsDigests(ctx.target, ctx.scope.tenantUuid),
  ]);
  const compared: string[] = [];
  const notCompared: { collection: string; reason: string }[] = [];
  const behind = srcBehind.length + tgtBehind.length > 0 ? `handlers behind: ${[...srcBehind, ...tgtBehind].join(", ")}` : undefined;
  for (const [collection, a] of src) {
    const b = tgt.get(collection);
    if (b === undefined) notCompared.push({ collection, reason: "not in the target (a home-domain readmodel, or another generation)" });
    else if (behind !== undefined) notCompared.push({ collection, reason: behind });
    else if (a.rows !== b.rows || a.md5 !== b.md5) {
      await failMove(ctx);
      throw new MnemeError(
        "INVALID_STATE",
        `tenant move of ${ctx.scope.tenantUuid}: documents of ${collection} differ between the shards; nothing switched ` +
          "(restore the target's readmodels from zero, then run the move again)",
      );
    } else compared.push(collection);
  }
  return { compared, notCompared };
}

/** After the switch: the move marked done, the report. */
async function finish(ctx: MoveContext, move: MoveRecord, resumed: boolean, pausedMs: number, t0: number): Promise<TenantMoveReport> {
  await ctx.store.setPhase(ctx.scope.tenantUuid, "done");
  progress(ctx, "done");
  return {
    tenantUuid: ctx.scope.tenantUuid,
    from: move.fromShard,
    to: move.toShard,
    resumed,
    copied: ctx.copied,
    verified: ctx.verified,
    documents: ctx.documents ?? { compared: [], notCompared: [{ collection: "*", reason: "compared by the run that switched" }] },
    pausedMs,
    durationMs: Date.now() - t0,
    ...(ctx.chains === undefined ? {} : { chains: ctx.chains }),
  };
}
