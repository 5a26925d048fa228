/**
 * Privacy on the write path: which stored event paths carry personal data,
 * the encryption step of appends, the aggregates whose folded state holds
 * personal data (never cached nor snapshotted), the warning about command
 * fields named like personal fields, `forget`'s erasure and `scrubStorage`.
 */
import type { InstalledDomain } from "../model/domain-install.js";
import { snapshotOptionsOf } from "../model/domain.js";
import { MnemeError } from "../model/errors.js";
import type { AggregateType, EventType, PersonalData } from "../model/tokens.js";
import type { NewEvent, RequestContext } from "../model/types.js";
import type { PersonalDataProtection } from "../privacy/personal-data-protection.js";
import { forgetAggregateUuidOf, SubjectForgotten } from "../privacy/privacy-domain.js";
import { PERSONAL_DATA_UNDECLARED_WARNING, undeclaredPersonalFields } from "../privacy/undeclared-fields.js";
import type { SchemaRegistry } from "../schema/schema-registry.js";
import type { EventRepository } from "../store/event-repository.js";
import type { SnapshotStore } from "../store/snapshot-store.js";
import { canScrubStorage } from "../store/storage-scrub.js";
import type { AggregateCache } from "./aggregate-cache.js";
import type { ReadmodelRegistry } from "./readmodel-registry.js";

/** A warning of registration, written to the log store once it is open. */
export interface StartWarning {
  message: string;
  data: Record<string, unknown>;
}

export class WritePathPrivacy {
  #personalPaths: Map<string, PersonalData> | undefined;
  #personalPathsFor = -1;
  #foldsPersonal = new WeakMap<AggregateType<any>, boolean>();
  #foldsPersonalFor = -1;

  /**
   * @param eventTypes the registered event types by path (read, never changed here)
   * @param keysOnlyInMemory true when keys would be kept in memory beside a durable event repository
   */
  constructor(
    readonly eventTypes: ReadonlyMap<string, EventType>,
    readonly keysOnlyInMemory: boolean,
  ) {}

  /** Personal data settings by stored event path (a current name or a former one), rebuilt when a domain was registered since. */
  personalDataAt(path: string): PersonalData | undefined {
    if (this.#personalPaths === undefined || this.#personalPathsFor !== this.eventTypes.size) {
      const byPath = new Map<string, PersonalData>();
      for (const t of this.eventTypes.values()) {
        if (t.personalData === undefined) continue;
        byPath.set(t.path, t.personalData);
        for (const former of t.renamedFrom) byPath.set(`${t.domain}.${former}`, t.personalData);
      }
      this.#personalPaths = byPath;
      this.#personalPathsFor = this.eventTypes.size;
    }
    return this.#personalPaths.get(path);
  }

  /** True when the aggregate evolves an event type with personal data. */
  foldsPersonalData(a: AggregateType<any>): boolean {
    // Asked on every load: kept per type until a domain is registered.
    if (this.#foldsPersonalFor !== this.eventTypes.size) {
      this.#foldsPersonal = new WeakMap();
      this.#foldsPersonalFor = this.eventTypes.size;
    }
    let answer = this.#foldsPersonal.get(a);
    if (answer === undefined) {
      answer = Object.keys(a.evolve).some(
        (key) => this.eventTypes.get(key.includes(".") ? key : `${a.domain}.${key}`)?.personalData !== undefined,
      );
      this.#foldsPersonal.set(a, answer);
    }
    return answer;
  }

  /** True when a registered event type has personal data (else appends skip the encryption step). */
  hasPersonalData(): boolean {
    this.personalDataAt("");
    return this.#personalPaths!.size > 0;
  }

  /**
   * The write step of the event view: encryption of personal fields, active when some event type has personal
   * data. `oldReaders` tells when a rolling deploy's compatibility mode wants them in clear (see rolling-upgrade.ts).
   */
  writeStep(
    protection: PersonalDataProtection,
    oldReaders: OldReaders,
  ): {
    write(events: readonly NewEvent[]): Promise<NewEvent[]> | readonly NewEvent[];
    active(): boolean;
  } {
    return { write: (events) => this.#encrypt(protection, events, oldReaders), active: () => this.hasPersonalData() };
  }

  /**
   * The write step of personal data: keys kept in memory only must not seal events a durable repository keeps;
   * while instances of a release that cannot open sealed fields run beside this one, the fields stay in clear
   * (the migration that ends the rolling upgrade seals them).
   */
  #encrypt(
    protection: PersonalDataProtection,
    events: readonly NewEvent[],
    oldReaders: OldReaders,
  ): Promise<NewEvent[]> | readonly NewEvent[] {
    if (this.keysOnlyInMemory) {
      if (events.some((e) => this.personalDataAt(`${e.domain}.${e.name}`) !== undefined)) {
        throw new MnemeError(
          "INVALID_STATE",
          "events with personalData need a durable keyStore beside a durable event repository (createSqliteBackends / createPostgresBackends give one): keys kept in memory would erase them at the next start",
        );
      }
      return events;
    }
    if (oldReaders.maybe() && events.some((e) => this.personalDataAt(`${e.domain}.${e.name}`) !== undefined)) {
      return oldReaders.confirm().then((clear) => (clear ? [...events] : protection.encrypt(events)));
    }
    return protection.encrypt(events);
  }
}

/** Whether events are written for the readers of an older release (personal data in clear): a cheap guess, then a check. */
export interface OldReaders {
  /** False when surely not (no compatibility mode as last seen). */
  maybe(): boolean;
  /** Reads the store's record again: true while it still admits the older release. */
  confirm(): Promise<boolean>;
}

/**
 * A command field named like a personal field of one of the domain's events
 * but not declared would be stored in clear: one process warning
 * `MNEME_PERSONAL_DATA_UNDECLARED` per domain, returned to be written to the log store at start too.
 */
export function warnUndeclaredPersonalData(domain: InstalledDomain, schemas: SchemaRegistry): StartWarning | undefined {
  const found = undeclaredPersonalFields(domain.commands.values(), domain.events.values(), (c) => schemas.documentFor(c));
  if (found.length === 0) return undefined;
  const named = found.map((f) => `${f.command} (${f.fields.join(", ")})`).join(", ");
  const message =
    `domain ${domain.name}: command fields named like personal fields of its events are not declared as personal data, ` +
    `so they are stored in clear wherever the command is kept (record, outbox, scheduled commands): ${named}. ` +
    `Declare them with command(name, { personalData: { subject, fields } }) (see docs/privacy.md)`;
  if (typeof process !== "undefined" && typeof process.emitWarning === "function") {
    process.emitWarning(message, { code: PERSONAL_DATA_UNDECLARED_WARNING, detail: `undeclared: ${named}` });
  }
  return { message, data: { code: PERSONAL_DATA_UNDECLARED_WARNING, commands: found } };
}

/** What `forget` touches. */
export interface ForgetHost {
  readonly personalData: PersonalDataProtection;
  readonly privacy: WritePathPrivacy;
  readonly aggregateCache: AggregateCache | undefined;
  readonly domains: ReadonlyMap<string, InstalledDomain>;
  readonly snapshotStore: SnapshotStore;
  readonly eventRepository: EventRepository;
}

/**
 * Erases a data subject: its keys, this instance's cached folds, the
 * snapshots of aggregates that fold personal data; appends `Privacy.SubjectForgotten`.
 */
export async function forgetSubject(host: ForgetHost, subject: string, opts: ForgetOptions = {}): Promise<{ keysDeleted: number }> {
  const keysDeleted = await host.personalData.forget(subject);
  await dropFoldedCopies(host);
  const aggregateUuid = forgetAggregateUuidOf(subject);
  // The event is the audit record of the erasure: who asked (reqCtx) and by which command, when given.
  const event = SubjectForgotten.create(
    aggregateUuid,
    { subject, keysDeleted },
    { tenantUuid: "", ...(opts.reqCtx === undefined ? {} : { reqCtx: opts.reqCtx }) },
  );
  if (opts.commandUuid !== undefined) event.commandUuid = opts.commandUuid;
  await host.eventRepository.append([event], {
    globalAggregates: [aggregateUuid],
  });
  return { keysDeleted };
}

/** Who asks `forget`, recorded on its `Privacy.SubjectForgotten` event (the Runtime command `ForgetSubject` passes its own). */
export interface ForgetOptions {
  /** The request context of the caller: its sender is recorded as the one who erased the subject. */
  readonly reqCtx?: RequestContext;
  /** The command that asked (Runtime.ForgetSubject). */
  readonly commandUuid?: string;
}

/**
 * The tenants of the events that carry `subject`'s personal data: a scan of
 * the events whose type declares personal data (their subject function asked
 * of each). What the Runtime's ForgetSubject asks before a tenant's
 * administrator may erase a subject.
 */
export async function tenantsOfSubject(
  host: { readonly privacy: WritePathPrivacy; readonly eventRepository: EventRepository },
  subject: string,
): Promise<Set<string>> {
  const paths: string[] = [];
  for (const t of host.privacy.eventTypes.values()) {
    if (t.personalData === undefined) continue;
    paths.push(t.path);
    for (const former of t.renamedFrom) paths.push(`${t.domain}.${former}`);
  }
  const tenants = new Set<string>();
  if (paths.length === 0) return tenants;
  for await (const page of host.eventRepository.readAll({ eventPaths: paths })) {
    for (const e of page) {
      const spec = host.privacy.personalDataAt(`${e.domain}.${e.name}`);
      let of: unknown;
      try {
        of = spec?.subject(e.payload as never, e as NewEvent as never);
      } catch {
        of = undefined;
      }
      if (of === subject) tenants.add(e.tenantUuid);
    }
  }
  return tenants;
}

/** Clears the aggregate cache and deletes the snapshots of aggregates that fold personal data (after forget, or a migration). */
export async function dropFoldedCopies(host: Omit<ForgetHost, "personalData" | "eventRepository">): Promise<void> {
  host.aggregateCache?.clear();
  for (const domain of host.domains.values()) {
    for (const a of domain.aggregates.values()) {
      if (snapshotOptionsOf(a).snapshotEvery === undefined) continue;
      // Snapshots of such aggregates are not taken any more; this removes those of an earlier release.
      if (host.privacy.foldsPersonalData(a)) await host.snapshotStore.deleteAggregateType(a.domain, a.name);
    }
  }
}

/** What `scrubStorage` touches. */
export interface ScrubHost {
  readonly eventRepository: EventRepository;
  readonly readmodels: ReadmodelRegistry;
  /** Every store once. */
  stores(): readonly object[];
}

/**
 * Waits (at most `waitMs`) until the running handlers have handled every
 * event up to the head known now, then has every store that can scrub its
 * storage do so, once per file or schema. The handlers still behind.
 */
export async function scrubStorage(host: ScrubHost, waitMs: number): Promise<{ behind: string[] }> {
  const head = Math.max(host.readmodels.head, await host.eventRepository.headPosition());
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), waitMs);
  });
  let behind: string[];
  try {
    behind = await host.readmodels.behind(head, timeout);
  } finally {
    clearTimeout(timer);
  }
  const scopes = new Set<string>();
  for (const store of host.stores()) {
    if (!canScrubStorage(store)) continue;
    const scope = store.storageScope();
    if (scopes.has(scope)) continue;
    scopes.add(scope);
    await store.scrubStorage();
  }
  return { behind };
}
