import { errorMessage, MnemeError } from "../model/errors.js";
import type { EventType } from "../model/tokens.js";
import type { Event, NewEvent } from "../model/types.js";
import type { CommandStore } from "../store/command-store.js";
import type { AppendListener, AppendOptions, EventRepository, ReadAllOptions } from "../store/event-repository.js";
import type { TaggedRead, TaggedReadOptions, TagQueryItem } from "../store/event-tags.js";
import { isSealedJsonSafe, jsonSafeProblem } from "../store/json-safe.js";
import type { StoreInfo } from "../store/store-info.js";
import { declareCapabilities, eventRepositoryCapabilities, type EventRepositoryCapabilities } from "../store/backend.js";

/**
 * A step between the stored form of events and what readers get: `read`
 * turns a page of stored events (in position order) into what every read
 * path hands out. It returns the same array when it changes nothing.
 */
export interface EventReadStep {
  read(events: Event[]): Event[] | Promise<Event[]>;
  /** False while the step would change nothing (asked on every read): the step is skipped. */
  active?(): boolean;
}

/** A step between what a command returns and what is stored: `write` turns new events into their stored form. */
export interface EventWriteStep {
  write(events: readonly NewEvent[]): readonly NewEvent[] | Promise<readonly NewEvent[]>;
  /**
   * False while the step has nothing to do (asked on every append). With no
   * active write step, an append goes straight to the store and its events come
   * back as written: they are in the current form already.
   */
  active?(): boolean;
}

/**
 * The facade's event repository as its parts use it: every optional method
 * there (doing nothing, or giving none, when the stored repository does not
 * offer it: see `capabilities`), and the stored repository.
 */
export type FacadeEventRepository = EventRepository &
  Required<Pick<EventRepository, "onAppend" | "joinCommandStore" | "onExternalAppend" | "loadEvents">> & {
    readonly stored: EventRepository;
    readonly capabilities: EventRepositoryCapabilities;
  };

/**
 * The event store as the facade and everything it serves read it: the
 * repository the application gave, with read steps applied to every event
 * that comes out (aggregate loads, live delivery, restores, history, Runtime
 * store access, HTTP) and write steps to every event that goes in. The
 * stored form never changes: upcasting happens on the way out.
 *
 * With no step active every call goes straight through (one extra call).
 * Live listeners (`onAppend`) get their events through the read steps too,
 * in append order, even when a step is asynchronous.
 */
export class EventView implements FacadeEventRepository {
  readonly #readSteps: EventReadStep[] = [];
  readonly #writeSteps: EventWriteStep[] = [];

  /** What the stored repository offers, decided once: its engine's declaration, or read from a repository of your own. */
  readonly capabilities: EventRepositoryCapabilities;

  constructor(readonly stored: EventRepository) {
    this.capabilities = eventRepositoryCapabilities(stored);
    // The view offers what the stored repository offers (its methods are always here, doing nothing without it).
    declareCapabilities(this, this.capabilities);
  }

  /** Adds a read step; steps run in the order they were added (for example decryption before upcasting). */
  addReadStep(step: EventReadStep): void {
    this.#readSteps.push(step);
  }

  /** Adds a write step; steps run in the order they were added. */
  addWriteStep(step: EventWriteStep): void {
    this.#writeSteps.push(step);
  }

  /** Applies the read steps to a page of stored events. */
  read(events: Event[]): Event[] | Promise<Event[]> {
    const steps = this.#readSteps;
    if (steps.length === 0 || events.length === 0) return events;
    let out: Event[] | Promise<Event[]> = events;
    for (const step of steps) {
      if (step.active?.() === false) continue;
      out = out instanceof Promise ? out.then((page) => step.read(page)) : step.read(out);
    }
    return out;
  }

  init(): Promise<void> {
    return this.stored.init();
  }

  append(events: readonly NewEvent[], opts?: AppendOptions): Promise<Event[]> {
    let writing = false;
    for (const step of this.#writeSteps) if (step.active?.() !== false) writing = true;
    // Nothing transformed on the way in: what the store returns is what readers would get (current names and versions).
    if (!writing) return this.stored.append(events, opts);
    return this.#append(events, opts);
  }

  async #append(events: readonly NewEvent[], opts?: AppendOptions): Promise<Event[]> {
    let toStore = events;
    for (const step of this.#writeSteps) toStore = await step.write(toStore);
    const stored = await this.stored.append(toStore, opts);
    return this.#readSteps.length === 0 ? stored : await this.read(stored);
  }

  loadAggregate(aggregateUuid: string, opts?: { fromVersion?: number }): Promise<Event[]> {
    const events = this.stored.loadAggregate(aggregateUuid, opts);
    return this.#readSteps.length === 0 ? events : events.then((page) => this.read(page));
  }

  async loadAggregates(aggregateUuids: readonly string[]): Promise<Map<string, Event[]>> {
    const streams = await this.stored.loadAggregates(aggregateUuids);
    if (this.#readSteps.length === 0) return streams;
    for (const [uuid, events] of streams) streams.set(uuid, await this.read(events));
    return streams;
  }

  readAll(opts?: ReadAllOptions): AsyncIterable<Event[]> {
    const pages = this.stored.readAll(this.#readAllOptions(opts));
    if (this.#readSteps.length === 0) return pages;
    return this.#readPages(pages);
  }

  async *#readPages(pages: AsyncIterable<Event[]>): AsyncGenerator<Event[], void, undefined> {
    for await (const page of pages) yield await this.read(page);
  }

  /** An `eventPaths` filter asks for the stored names too (see EventAliases). */
  #readAllOptions(opts: ReadAllOptions | undefined): ReadAllOptions | undefined {
    const paths = opts?.eventPaths;
    if (paths === undefined || this.#storedPaths === undefined) return opts;
    return { ...opts, eventPaths: this.#storedPaths(paths) };
  }

  #storedPaths: ((paths: readonly string[]) => string[]) | undefined;

  /** How a filter on current event paths widens to the paths events are stored under (former names). */
  setStoredPaths(fn: (paths: readonly string[]) => string[]): void {
    this.#storedPaths = fn;
  }

  headPosition(): Promise<number> {
    return this.stored.headPosition();
  }

  info(): Promise<StoreInfo> {
    return this.stored.info();
  }

  close(): Promise<void> {
    return this.stored.close();
  }

  /**
   * Tells `listener` the events of each append of this repository, through
   * the read steps (in append order, even when a step is asynchronous). A
   * repository that does not offer it (capabilities.appendListeners) tells
   * nothing: the returned remover does nothing.
   */
  onAppend(listener: AppendListener): () => void {
    if (!this.capabilities.appendListeners) return () => undefined;
    // A chain keeps listeners in append order when a read step is asynchronous.
    let chain: Promise<void> = Promise.resolve();
    return this.stored.onAppend!((events) => {
      if (this.#readSteps.length === 0) {
        listener(events);
        return;
      }
      const out = this.read(events as Event[]);
      if (!(out instanceof Promise)) {
        listener(out);
        return;
      }
      chain = chain.then(() => out).then(listener, () => undefined);
    });
  }

  /** Whether the repository writes command records of `commandStore` with its events (false when it does not offer it). */
  joinCommandStore(commandStore: CommandStore): boolean {
    return this.capabilities.joinsCommandStore && this.stored.joinCommandStore!(commandStore);
  }

  /** Tells `listener` of appends by other instances (never, when the repository does not offer it). */
  onExternalAppend(listener: () => void): () => void {
    if (!this.capabilities.externalAppends) return () => undefined;
    return this.stored.onExternalAppend!(listener);
  }

  /** The events of `eventUuids`, through the read steps; none when the repository does not offer it (replay-with-events lost). */
  async loadEvents(eventUuids: readonly string[]): Promise<Event[]> {
    if (!this.capabilities.loadEvents) return [];
    const events = await this.stored.loadEvents!(eventUuids);
    return this.#readSteps.length === 0 ? events : await this.read(events);
  }

  /** Whether the repository stores event tags and answers tag queries (DCB, `ctx.events`). */
  get storesTags(): boolean {
    return this.stored.storesTags === true && this.stored.readTagged !== undefined;
  }

  /** The events matching `items` in `tenantUuid` and the head they were read at, through the read steps (INVALID_STATE when the repository stores no tags). */
  async readTagged(tenantUuid: string, items: readonly TagQueryItem[], opts?: TaggedReadOptions): Promise<TaggedRead<Event>> {
    if (!this.storesTags) throw new MnemeError("INVALID_STATE", "this event repository stores no event tags");
    const read = await this.stored.readTagged!(tenantUuid, items, opts);
    return this.#readSteps.length === 0 ? read : { events: await this.read(read.events), position: read.position };
  }
}

/**
 * The read step of event evolution: a stored event of an older version is
 * handed out as its type's current version (the type's upcasters, one version
 * at a time), and one stored under a former name (`renamedFrom`) under the
 * current name. The stored payload is not touched. An upcaster that throws or
 * returns something that is not JSON-safe, or a stored version newer than the
 * registered one (written by a newer release), is UPCAST_FAILED: the read
 * fails, nothing is written, and a handler retries it like any failure.
 */
export class Upcasting implements EventReadStep {
  /** Stored path -> type, for every type with a version > 1 or former names. */
  readonly #types = new Map<string, EventType>();
  /** Every registered type by path: a stored version above the registered one is refused even for a type at version 1. */
  readonly #all = new Map<string, EventType>();

  /** Takes a registered event type into account. */
  register(type: EventType): void {
    this.#all.set(type.path, type);
    if (type.version > 1) this.#types.set(type.path, type);
    for (const former of type.renamedFrom) this.#types.set(`${type.domain}.${former}`, type);
  }

  /** The stored paths a filter on `paths` must include (each current path and its former names). */
  storedPaths(paths: readonly string[]): string[] {
    const out = new Set(paths);
    for (const [stored, type] of this.#types) if (stored !== type.path && out.has(type.path)) out.add(stored);
    return [...out];
  }

  read(events: Event[]): Event[] {
    const versioned = this.#types.size > 0;
    let out: Event[] | undefined;
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      // Most events are of a version-1 type and stored at version 1: nothing to look up.
      if (!versioned && e.eventVersion === undefined) continue;
      const path = `${e.domain}.${e.name}`;
      const type = this.#types.get(path) ?? (e.eventVersion === undefined ? undefined : this.#all.get(path));
      if (type === undefined) continue;
      const upcast = this.#upcast(type, e);
      if (upcast !== e) (out ??= events.slice())[i] = upcast;
    }
    return out ?? events;
  }

  #upcast(type: EventType, e: Event): Event {
    const from = e.eventVersion ?? 1;
    const renamed = e.name !== type.name;
    if (from === type.version && !renamed) return e;
    const where = `event ${e.domain}.${e.name} at position ${e.position} (version ${from})`;
    if (from > type.version) {
      throw new MnemeError(
        "UPCAST_FAILED",
        `${where} was written by a newer release: ${type.path} is registered at version ${type.version}; deploy the newer release or register the version`,
      );
    }
    // A frozen (memory store) payload is copied, so an upcaster that edits its input works as on every backend.
    let payload: unknown = isSealedJsonSafe(e.payload) ? JSON.parse(JSON.stringify(e.payload)) : e.payload;
    for (let v = from; v < type.version; v++) payload = this.#step(type, v, payload, e, where);
    // One check of the result (not one per step): a failure is traced back to its step below.
    if (jsonSafeProblem(payload) !== undefined) this.#blame(type, from, e, where);
    // Built field by field (a spread of the stored event costs more than the copy).
    const out: Event = {
      eventUuid: e.eventUuid,
      position: e.position,
      tenantUuid: e.tenantUuid,
      domain: e.domain,
      name: type.name,
      aggregateUuid: e.aggregateUuid,
      version: e.version,
      createdAt: e.createdAt,
      reqCtx: e.reqCtx,
      payload,
    };
    if (e.commandUuid !== undefined) out.commandUuid = e.commandUuid;
    if (e.causationId !== undefined) out.causationId = e.causationId;
    if (e.correlationId !== undefined) out.correlationId = e.correlationId;
    if (type.version !== 1) out.eventVersion = type.version;
    return out;
  }

  #step(type: EventType, v: number, payload: unknown, e: Event, where: string): unknown {
    try {
      return type.upcasters[v]!(payload, e);
    } catch (err) {
      throw new MnemeError("UPCAST_FAILED", `${where}: the upcaster from version ${v} to ${v + 1} threw: ${errorMessage(err)}`, {
        cause: err,
      });
    }
  }

  /** Runs the chain again, checking after each step, and throws for the first step whose result is not JSON-safe. */
  #blame(type: EventType, from: number, e: Event, where: string): never {
    let payload: unknown = JSON.parse(JSON.stringify(e.payload));
    for (let v = from; v < type.version; v++) {
      payload = this.#step(type, v, payload, e, where);
      const problem = jsonSafeProblem(payload);
      if (problem !== undefined) {
        throw new MnemeError(
          "UPCAST_FAILED",
          `${where}: the upcaster from version ${v} to ${v + 1} returned a payload that is not JSON-safe at ${problem.pointer || "its root"}: ${problem.message}`,
          { details: [{ pointer: problem.pointer, message: problem.message }] },
        );
      }
    }
    throw new MnemeError("UPCAST_FAILED", `${where}: the upcasters returned a payload that is not JSON-safe`);
  }
}
