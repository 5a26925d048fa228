/**
 * Personal data written before it was declared (docs/privacy.md): events
 * stored while their type declared no `personalData` (the built-in account of
 * the first release, an app type declared later) hold the now-declared
 * fields in clear, so `forget` cannot erase them. This module
 * - finds them (`scanClearPersonalData`: the start-up check, bounded), and
 * - seals them in place (`migratePersonalData`): each clear value at a
 *   declared field is sealed under its subject's key (made when missing)
 *   through the one rewrite the stores allow (`sealStoredPayloads`,
 *   `sealRecordPayloads`: compare-and-swap, clear values to envelopes
 *   only), page by page, with a progress mark (`Privacy.PersonalDataMigrated`)
 *   after each page. A rerun, after a kill anywhere, continues from the
 *   mark and never seals a value twice: a sealed value is no longer clear,
 *   and a payload that moved since it was read is skipped by the store.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { MnemeError } from "../model/errors.js";
import type { PersonalData } from "../model/tokens.js";
import type { Event, NewEvent, RequestContext } from "../model/types.js";
import type { CommandRecord, CommandStore } from "../store/command-store.js";
import type { EventRepository } from "../store/event-repository.js";
import { SUBJECT_KEY_BYTES, type SubjectKey, validateKeyStoreId } from "../store/key-store.js";
import type { PayloadSealing } from "../store/payload-sealing.js";
import { REDACTED } from "../model/redact.js";
import { commandSubjectOf, type StoredCommandType } from "./command-payloads.js";
import { envelopeKeyId } from "./field-envelope.js";
import type { PersonalDataProtection } from "./personal-data-protection.js";
import { pointerTokens, replaceAt, valueAt } from "./personal-fields.js";
import {
  forgetAggregateUuidOf,
  migrationAggregateUuid,
  PersonalDataMigrated,
  type PersonalDataMigrated as Migrated,
  SubjectForgotten,
} from "./privacy-domain.js";

/** An event type as the migration sees it: its stored paths and its declaration. */
export interface DeclaredEventType {
  readonly domain: string;
  readonly name: string;
  readonly renamedFrom: readonly string[];
  readonly personalData?: PersonalData;
}

/** What the migration and the check read and write. */
export interface PersonalDataMigrationHost {
  /** The stored events, as the backend keeps them (no decryption, no upcasting). */
  readonly stored: EventRepository;
  readonly commandStore: CommandStore;
  readonly protection: PersonalDataProtection;
  readonly eventTypes: () => Iterable<DeclaredEventType>;
  readonly commandTypes: () => Iterable<StoredCommandType>;
  /** Appends mneme's own events (progress marks, SubjectForgotten) through the facade's event store. */
  readonly append: (events: NewEvent[], globalAggregates: string[]) => Promise<unknown>;
  /** Drops the folded copies of personal data: the aggregate cache, snapshots of aggregates that fold it. */
  readonly dropFoldedCopies: () => Promise<void>;
}

/** The subjects whose personal data is stored in clear, as a check or a migration found them. */
export interface ClearPersonalData {
  /** Distinct subjects found with a declared field in clear (counted up to 10,000; `subjectsCapped` beyond). */
  readonly subjects: number;
  readonly subjectsCapped: boolean;
  /** The first few of them (up to 10), in position order. */
  readonly firstSubjects: readonly string[];
  /** Events with a declared field in clear. */
  readonly events: number;
  /** Events read whose subject could not be named (the subject function threw on the stored payload): left as they are. */
  readonly unnamed: number;
  /** Events of declared types the check read. */
  readonly checked: number;
  /** The check read events of declared types up to this position. */
  readonly checkedThrough: number;
  /** The head position when the check began. */
  readonly head: number;
  /** True when every event up to `head` was checked (else the bound cut it: `checkedThrough < head`). */
  readonly complete: boolean;
  /** The progress mark the check started from (the end of the last migration), 0 when none. */
  readonly after: number;
}

/** Options of {@link migratePersonalData}. */
export interface MigratePersonalDataOptions {
  /** Events read per page (one rewrite transaction and one progress mark per page). Default 500. */
  readonly batchSize?: number;
  /** Only report what would be sealed; nothing is written. */
  readonly dryRun?: boolean;
  /** Stops after the page in progress (the rerun continues from the mark). */
  readonly signal?: AbortSignal;
}

/** What {@link migratePersonalData} did. */
export interface PersonalDataMigrationReport {
  /** Events whose payload was rewritten. */
  readonly sealedEvents: number;
  /** Values sealed in them. */
  readonly sealedValues: number;
  /** Command records whose payload was rewritten (declared fields sealed, secret fields "[redacted]"). */
  readonly sealedRecords: number;
  /** Distinct subjects sealed. */
  readonly subjects: number;
  /** Subjects forgotten before the migration: their earlier values were sealed under a key that is not kept (they read "[erased]"). */
  readonly erasedSubjects: readonly string[];
  /** Events whose subject could not be named: left in clear (see docs/privacy.md). */
  readonly unnamed: number;
  /** The position the events were migrated through. */
  readonly throughPosition: number;
  /** False when stopped by the signal before the head. */
  readonly complete: boolean;
  readonly dryRun: boolean;
}

const SUBJECTS_COUNTED = 10_000;
const FIRST_SUBJECTS = 10;

/** The declarations the migration covers, as text: a mark made under other declarations does not count. */
export function declarationsOf(types: Iterable<DeclaredEventType>): string[] {
  const out: string[] = [];
  for (const t of types) if (t.personalData !== undefined) out.push(`${t.domain}.${t.name}:${t.personalData.fields.join(",")}`);
  return out.sort();
}

/** The stored paths (current and former names) of the declared types, with their declaration. */
function declaredPaths(types: Iterable<DeclaredEventType>): Map<string, PersonalData> {
  const out = new Map<string, PersonalData>();
  for (const t of types) {
    if (t.personalData === undefined) continue;
    out.set(`${t.domain}.${t.name}`, t.personalData);
    for (const former of t.renamedFrom) out.set(`${t.domain}.${former}`, t.personalData);
  }
  return out;
}

/** The declared fields of a payload that hold a clear value (neither an envelope nor absent). */
function clearFields(payload: unknown, fields: readonly string[]): string[] {
  return fields.filter((f) => {
    const v = valueAt(payload, pointerTokens(f));
    return v !== undefined && envelopeKeyId(v) === undefined;
  });
}

/** The subject of a stored event, or undefined when its subject function cannot name it from the stored payload. */
function storedSubject(spec: PersonalData, e: Event): string | undefined {
  try {
    const s = spec.subject(e.payload as never, e as NewEvent);
    validateKeyStoreId("subject", s);
    return s;
  } catch {
    return undefined;
  }
}

/** The last progress mark made under the current declarations, if any. */
async function lastMark(host: PersonalDataMigrationHost, declarations: string[]): Promise<Migrated | undefined> {
  const events = await host.stored.loadAggregate(migrationAggregateUuid);
  const text = JSON.stringify(declarations);
  for (let i = events.length - 1; i >= 0; i--) {
    const p = events[i]!.payload as Migrated;
    if (events[i]!.name === PersonalDataMigrated.name && JSON.stringify(p.declarations) === text) return p;
  }
  return undefined;
}

class SubjectTally {
  readonly seen = new Set<string>();
  readonly first: string[] = [];
  capped = false;
  add(subject: string): void {
    if (this.seen.has(subject)) return;
    if (this.seen.size >= SUBJECTS_COUNTED) {
      this.capped = true;
      return;
    }
    this.seen.add(subject);
    if (this.first.length < FIRST_SUBJECTS) this.first.push(subject);
  }
}

/**
 * The start-up check: reads events of declared types after the last
 * migration's mark (from the start when there is none), at most `limit` of
 * them, and counts those with a declared field in clear. One aggregate load
 * and at most `limit` events read; nothing written.
 */
export async function scanClearPersonalData(host: PersonalDataMigrationHost, limit: number): Promise<ClearPersonalData> {
  const types = [...host.eventTypes()];
  const paths = declaredPaths(types);
  const head = await host.stored.headPosition();
  const empty = { subjects: 0, subjectsCapped: false, firstSubjects: [], events: 0, unnamed: 0, head, checked: 0 };
  if (paths.size === 0) return { ...empty, checkedThrough: head, complete: true, after: head };
  const after = (await lastMark(host, declarationsOf(types)))?.throughPosition ?? 0;
  const tally = new SubjectTally();
  let events = 0;
  let unnamed = 0;
  let read = 0;
  let checkedThrough = after;
  let complete = true;
  outer: for await (const page of host.stored.readAll({
    afterPosition: after,
    untilPosition: head,
    eventPaths: [...paths.keys()],
    batchSize: Math.min(1000, Math.max(1, limit)),
  })) {
    for (const e of page) {
      if (read >= limit) {
        complete = false;
        break outer;
      }
      read++;
      checkedThrough = e.position;
      const spec = paths.get(`${e.domain}.${e.name}`)!;
      if (clearFields(e.payload, spec.fields).length === 0) continue;
      const subject = storedSubject(spec, e);
      if (subject === undefined) {
        unnamed++;
        continue;
      }
      events++;
      tally.add(subject);
    }
  }
  if (complete) checkedThrough = head;
  return {
    subjects: tally.seen.size,
    subjectsCapped: tally.capped,
    firstSubjects: tally.first,
    events,
    unnamed,
    checked: read,
    checkedThrough,
    head,
    complete,
    after,
  };
}

/** Events a clean check must have read before it records how far it got (below that, reading again costs less than an event). */
export const CLEAN_CHECK_MARK_MIN = 1_000;

/**
 * After a start-up check that found nothing in clear and either was cut
 * short by its bound or read at least {@link CLEAN_CHECK_MARK_MIN} events: a
 * progress mark at the position it reached, so the next start reads on from there (a large store is read once,
 * in bounded steps over several starts, not again at every start). Nothing is
 * recorded when anything was found: the migration must still read it.
 */
export async function recordCleanCheck(host: PersonalDataMigrationHost, found: ClearPersonalData): Promise<boolean> {
  if (found.events > 0 || found.unnamed > 0 || found.checked === 0) return false;
  // A check cut short by its bound always records (the store is larger than the bound); a complete one from a size on.
  if (found.complete && found.checked < CLEAN_CHECK_MARK_MIN) return false;
  const mark: Migrated = {
    declarations: declarationsOf(host.eventTypes()),
    throughPosition: found.checkedThrough,
    sealedEvents: 0,
    complete: found.complete,
  };
  await host.append([PersonalDataMigrated.create(migrationAggregateUuid, mark, { tenantUuid: "" })], [migrationAggregateUuid]);
  return true;
}

/** When each subject was forgotten last (position and createdAt of its last SubjectForgotten), cached for one run. */
class ForgetTimes {
  readonly #known = new Map<string, { position: number; createdAt: number } | null>();
  constructor(private readonly stored: EventRepository) {}
  async of(subject: string): Promise<{ position: number; createdAt: number } | undefined> {
    if (!this.#known.has(subject)) {
      const events = await this.stored.loadAggregate(forgetAggregateUuidOf(subject));
      const last = events.findLast((e) => e.name === SubjectForgotten.name && (e.payload as { subject?: unknown }).subject === subject);
      this.#known.set(subject, last === undefined ? null : { position: last.position, createdAt: last.createdAt });
    }
    return this.#known.get(subject) ?? undefined;
  }
}

/** A key that is never stored: what it seals reads "[erased]" at once (values of subjects forgotten before the migration). */
function discardedKey(subject: string): SubjectKey {
  return { subject, keyId: randomUUID(), key: new Uint8Array(randomBytes(SUBJECT_KEY_BYTES)), createdAt: 0 };
}

/** `payload` with `fields` sealed under `key` where they are clear. */
function sealClear(protection: PersonalDataProtection, payload: unknown, fields: readonly string[], key: SubjectKey): unknown {
  let out = payload;
  for (const f of fields) {
    const tokens = pointerTokens(f);
    const v = valueAt(out, tokens);
    if (v === undefined || envelopeKeyId(v) !== undefined) continue;
    out = replaceAt(out, tokens, protection.seal(v, key));
  }
  return out;
}

/** The keys, subjects and counts of one migration run (see {@link migratePersonalData}). */
class MigrationRun {
  readonly forgets: ForgetTimes;
  readonly tally = new SubjectTally();
  readonly erased = new Set<string>();
  readonly #announced = new Set<string>();
  sealedEvents = 0;
  sealedValues = 0;
  unnamed = 0;

  constructor(
    private readonly host: PersonalDataMigrationHost,
    private readonly dryRun: boolean,
  ) {
    this.forgets = new ForgetTimes(host.stored);
  }

  /** The key to seal a value of `subject` written at (position, createdAt): discarded when the subject was forgotten after it. */
  readonly keyFor = async (subject: string, at: { position?: number; createdAt: number }): Promise<SubjectKey> => {
    const forgot = await this.forgets.of(subject);
    const before = forgot !== undefined && (at.position !== undefined ? at.position < forgot.position : at.createdAt < forgot.createdAt);
    // A dry run makes no key: what it seals is thrown away.
    if (!before) return this.dryRun ? { ...discardedKey(subject), createdAt: 1 } : this.host.protection.liveKey(subject);
    this.erased.add(subject);
    return discardedKey(subject);
  };

  /** Readmodels hold the clear copies of a subject forgotten before: tell them again, before its values are sealed away. */
  readonly announce = async (subjects: Iterable<string>): Promise<void> => {
    const fresh = [...subjects].filter((s) => !this.#announced.has(s));
    for (const s of fresh) {
      this.#announced.add(s);
      if (this.dryRun) continue;
      const agg = forgetAggregateUuidOf(s);
      await this.host.append([SubjectForgotten.create(agg, { subject: s, keysDeleted: 0 }, { tenantUuid: "" })], [agg]);
    }
  };

  /** The rewrites of one page of events (clear declared fields sealed); the subjects erased before they were written, in `erasedHere`. */
  async sealPage(page: readonly Event[], paths: Map<string, PersonalData>, erasedHere: Set<string>): Promise<PayloadSealing[]> {
    const rewrites: PayloadSealing[] = [];
    for (const e of page) {
      const spec = paths.get(`${e.domain}.${e.name}`)!;
      const fields = clearFields(e.payload, spec.fields);
      if (fields.length === 0) continue;
      const subject = storedSubject(spec, e);
      if (subject === undefined) {
        this.unnamed++;
        continue;
      }
      const key = await this.keyFor(subject, e);
      if (this.erased.has(subject)) erasedHere.add(subject);
      this.tally.add(subject);
      rewrites.push({ id: e.eventUuid, stored: e.payload, sealed: sealClear(this.host.protection, e.payload, fields, key) });
      this.sealedValues += fields.length;
    }
    return rewrites;
  }

  /** Records how far the run went (a progress mark; `complete` once events and records are all done). */
  async mark(declarations: string[], throughPosition: number, counts: { sealedEvents: number; sealedRecords?: number }, complete: boolean) {
    const mark: Migrated = { declarations, throughPosition, ...counts, complete };
    await this.host.append([PersonalDataMigrated.create(migrationAggregateUuid, mark, { tenantUuid: "" })], [migrationAggregateUuid]);
  }
}

function checkedBatchSize(opts: MigratePersonalDataOptions): number {
  const batchSize = opts.batchSize ?? 500;
  if (!Number.isSafeInteger(batchSize) || batchSize < 1 || batchSize > 10_000) {
    throw new MnemeError("INVALID_REQUEST", `migratePersonalData: batchSize must be an integer in 1..10000, got ${String(batchSize)}`);
  }
  return batchSize;
}

/**
 * Seals the declared personal fields stored in clear, in events (from the
 * last progress mark to the head as it was when the run began) and in
 * command records (all of them, each rewritten once: a sealed or redacted
 * value is not clear any more). See the module comment and docs/privacy.md.
 */
export async function migratePersonalData(
  host: PersonalDataMigrationHost,
  opts: MigratePersonalDataOptions = {},
): Promise<PersonalDataMigrationReport> {
  const batchSize = checkedBatchSize(opts);
  const dryRun = opts.dryRun === true;
  const repo = host.stored;
  if (!dryRun && typeof repo.sealStoredPayloads !== "function") {
    throw new MnemeError("INVALID_STATE", "migratePersonalData: the event repository cannot rewrite stored payloads (sealStoredPayloads)");
  }
  const types = [...host.eventTypes()];
  const paths = declaredPaths(types);
  const declarations = declarationsOf(types);
  const head = await repo.headPosition();
  const after = (await lastMark(host, declarations))?.throughPosition ?? 0;
  const run = new MigrationRun(host, dryRun);
  let through = after;
  let complete = true;

  if (paths.size > 0 && after < head) {
    for await (const page of repo.readAll({ afterPosition: after, untilPosition: head, eventPaths: [...paths.keys()], batchSize })) {
      const erasedHere = new Set<string>();
      const rewrites = await run.sealPage(page, paths, erasedHere);
      through = page[page.length - 1]!.position;
      if (!dryRun) {
        await run.announce(erasedHere);
        if (rewrites.length > 0) run.sealedEvents += await repo.sealStoredPayloads!(rewrites);
        await run.mark(declarations, through, { sealedEvents: rewrites.length }, false);
      } else {
        run.sealedEvents += rewrites.length;
      }
      if (opts.signal?.aborted === true) {
        complete = through >= head;
        break;
      }
    }
  }
  if (complete) through = Math.max(through, head);

  let sealedRecords = 0;
  if (complete) sealedRecords = await migrateRecords(host, run.keyFor, run.announce, dryRun);
  if (!dryRun) {
    await host.dropFoldedCopies();
    if (complete) await run.mark(declarations, through, { sealedEvents: 0, sealedRecords }, true);
  }
  return {
    sealedEvents: run.sealedEvents,
    sealedValues: run.sealedValues,
    sealedRecords,
    subjects: run.tally.seen.size,
    erasedSubjects: [...run.erased],
    unnamed: run.unnamed,
    throughPosition: through,
    complete,
    dryRun,
  };
}

/** Command records: declared fields in clear sealed (or "[redacted]" when their subject cannot be named), secret fields in clear "[redacted]". */
async function migrateRecords(
  host: PersonalDataMigrationHost,
  keyFor: (subject: string, at: { createdAt: number }) => Promise<SubjectKey>,
  announce: (subjects: Iterable<string>) => Promise<void>,
  dryRun: boolean,
): Promise<number> {
  const store = host.commandStore;
  if (!dryRun && typeof store.sealRecordPayloads !== "function") return 0;
  const types = new Map<string, StoredCommandType>();
  for (const t of host.commandTypes()) {
    if (t.secretFields.length > 0 || t.personalData !== undefined) types.set(`${t.domain}.${t.name}`, t);
  }
  if (types.size === 0) return 0;
  let n = 0;
  let cursor: string | undefined;
  do {
    const page = await store.list({ limit: 500, ...(cursor === undefined ? {} : { cursor }) });
    cursor = page.nextCursor;
    const rewrites: PayloadSealing[] = [];
    const forgotten = new Set<string>();
    for (const rec of page.items) {
      const type = types.get(`${rec.domain}.${rec.name}`);
      if (type === undefined) continue;
      const sealed = await sealedRecordPayload(host, type, rec, keyFor, forgotten);
      if (sealed !== rec.payload) rewrites.push({ id: rec.commandUuid, stored: rec.payload, sealed });
    }
    if (rewrites.length === 0) continue;
    if (dryRun) {
      n += rewrites.length;
      continue;
    }
    await announce(forgotten);
    n += await store.sealRecordPayloads!(rewrites);
  } while (cursor !== undefined);
  return n;
}

async function sealedRecordPayload(
  host: PersonalDataMigrationHost,
  type: StoredCommandType,
  rec: CommandRecord,
  keyFor: (subject: string, at: { createdAt: number }) => Promise<SubjectKey>,
  forgotten: Set<string>,
): Promise<unknown> {
  let out = rec.payload;
  const isClear = (v: unknown) => v !== undefined && v !== REDACTED && envelopeKeyId(v) === undefined;
  for (const field of type.secretFields) {
    if (typeof out === "object" && out !== null && !Array.isArray(out) && isClear((out as Record<string, unknown>)[field])) {
      out = { ...(out as Record<string, unknown>), [field]: REDACTED };
    }
  }
  const spec = type.personalData;
  if (spec === undefined) return out;
  const clear = spec.fields.filter((f) => isClear(valueAt(out, pointerTokens(f))));
  if (clear.length === 0) return out;
  let subject: string | undefined;
  try {
    subject = commandSubjectOf(type, spec, rec.payload, rec.reqCtx as RequestContext);
  } catch {
    subject = undefined;
  }
  if (subject === undefined) {
    for (const f of clear) out = replaceAt(out, pointerTokens(f), REDACTED);
    return out;
  }
  const key = await keyFor(subject, rec);
  if (key.createdAt === 0) forgotten.add(subject);
  return sealClear(host.protection, out, clear, key);
}
