import { authorized, checkPermission, newPermission, type Permission, type PermissionFunc } from "./permission.js";
import { MnemeError } from "./errors.js";
import { retentionMs } from "./retention-period.js";
import type {
  AggregateTenancy,
  AggregateType,
  CommandPersonalData,
  CommandPersonalDataOptions,
  CommandType,
  EventOptions,
  EventType,
  Evolver,
  LiveQuerySettings,
  PersonalData,
  QueryType,
  Upcaster,
} from "./tokens.js";
import type { CommandEnvelope, Event, JsonSchema, NewEvent, QueryEnvelope, RequestContext } from "./types.js";
import type { CommandContext, QueryContext } from "./context.js";
import { isStandardSchema, type StandardSchemaV1 } from "./standard-schema.js";
import { SYSTEM_EVENT_KINDS, type SystemEventKind } from "./system-event-kind.js";

/** What a command handler may return: events, nothing, or events with a result (of type `R`) for the caller. */
export type CommandHandlerResult<R = unknown> = readonly NewEvent[] | void | undefined | { events?: readonly NewEvent[]; result?: R };

export type CommandHandler<P = any> = (
  ctx: CommandContext,
  cmd: CommandEnvelope<P>,
  payload: P,
) => CommandHandlerResult | Promise<CommandHandlerResult>;
export type QueryHandler<P = any, R = any> = (ctx: QueryContext, qry: QueryEnvelope<P>, payload: P) => R | Promise<R>;

export interface MessageOptions {
  readonly description?: string;
  /** Default: `authorized`. A built-in level or a custom permission function. */
  readonly permission?: PermissionFunc;
  /** The payload's schema: JSON Schema, or a Standard Schema v1 validator (zod 4, valibot, arktype, ...). */
  readonly schema?: JsonSchema | StandardSchemaV1;
  readonly secretFields?: readonly string[];
  /**
   * The JSON Schema of the result (a query's answer, a command handler's `result`), for the
   * applications around this one: the OpenAPI document's answer and the generated client's
   * result type. Not checked against what the handler returns.
   */
  readonly resultSchema?: JsonSchema;
}

/** Options of `Domain.query`: those of every message, and whether it may be subscribed to live. */
export interface QueryDefinitionOptions extends MessageOptions {
  /**
   * `true` or LiveQueryOptions: the query may be subscribed to over SSE
   * (`GET .../queries/{domain}/{name}/live`), and runs again after a
   * readmodel batch commits, or on the other signals it names (see
   * LiveQuerySettings and docs/http.md).
   */
  readonly live?: boolean | LiveQueryOptions;
}

/** Options of `Domain.command`: those of every message, and the personal data the payload carries. */
export interface CommandOptions<P = any> extends MessageOptions {
  /**
   * Payload fields that are personal data of a subject: stored encrypted under
   * the subject's key wherever mneme keeps the command, "[erased]" after
   * `facade.forget(subject)`; the handler gets them in clear.
   */
  readonly personalData?: CommandPersonalDataOptions<P>;
}

/**
 * Evolvers keyed by event name (events of this domain) or by event path
 * `Domain.Name` (events of another domain). In a domain defined with its
 * event map (`defineDomain<{ Opened: Opened }>(...)`), a key that names no
 * event is a type error, and each evolver's payload is typed.
 */
export type EvolveMap<S, E = Record<string, any>> = { readonly [K in keyof E & string]?: Evolver<S, E[K]> } & {
  readonly [path: `${string}.${string}`]: Evolver<S>;
} & {
  // An array is the `on(...)` form: kept out of this one so the compiler reports an array's errors against that form.
  readonly length?: never;
};

/**
 * One evolver of the token-keyed form, made by `on(EventToken, fn)`: the
 * payload type comes from the token, of this domain or of another.
 */
export interface EvolveStep<S, P = any> {
  readonly kind: "evolveStep";
  readonly event: EventType<P>;
  readonly evolve: Evolver<S, P>;
}

/** `on` as the function form of `evolve` receives it: with the aggregate's state type bound. */
export type EvolveOn<S> = <P>(event: EventType<P>, evolve: Evolver<S, P>) => EvolveStep<S, P>;

/**
 * The state type a top-level `on(...)` falls back to when nothing gives it one:
 * TypeScript does not pass the state type an aggregate infers from
 * `initialState` into the calls in its `evolve` array. It makes the compiler's
 * error name the two ways out instead of a type `unknown` deep in a union.
 */
export interface StateTypeNotGiven {
  readonly "on(): give the state type, as D.aggregate<State>(...) or on(Event, (s: State, p) => ...), or write evolve: (on) => [on(...)]": never;
}

/**
 * Pairs an event token with its evolver; the payload type comes from the token.
 * The state type comes from the aggregate: give it (`aggregate<TodoState>(...)`),
 * or use the function form `evolve: (on) => [...]`, which infers it from `initialState`.
 * @example
 * const TodoAggregate = Todo.aggregate<TodoState>("Todo", {
 *   initialState: () => ({ exists: false, title: "" }),
 *   evolve: [
 *     on(TodoCreated, (_s, p) => ({ exists: true, title: p.title })),   // p: TodoCreated
 *     on(Tenant.TenantRemoved, (s) => ({ ...s, exists: false })),       // an event of another domain
 *   ],
 * });
 */
export function on<S = StateTypeNotGiven, P = any>(event: EventType<P>, evolve: Evolver<S, P>): EvolveStep<S, P> {
  return Object.freeze({ kind: "evolveStep" as const, event, evolve });
}

export interface AggregateOptions<S, E = Record<string, any>> {
  readonly initialState: () => S;
  /**
   * How events fold into the state, in one of three forms:
   * - evolvers keyed by event name (events of this domain) or by event path `Domain.Name`
   *   (`{ TodoCreated: (s, p: TodoCreated) => ... }`; payloads typed by the domain's event map, if any);
   * - steps made by `on(EventToken, fn)`, each payload typed by its token (`[on(TodoCreated, (s, p) => ...)]`);
   * - a function given `on` that returns such steps (`(on) => [on(TodoCreated, (s, p) => ...)]`), which
   *   also types the state from `initialState` without a type argument.
   */
  readonly evolve: EvolveMap<S, E> | readonly EvolveStep<S>[] | ((on: EvolveOn<S>) => readonly EvolveStep<S>[]);
  /** Default `"tenant"`: the aggregate belongs to the tenant of its first event. `"global"` opts out. */
  readonly tenancy?: AggregateTenancy;
  /**
   * Keep the folded state every this many versions (a positive integer), so a
   * load reads the newest snapshot plus the events after it. Default: no snapshots.
   */
  readonly snapshotEvery?: number;
  /**
   * The version of the state's shape (an integer >= 1, default 1): snapshots
   * of another snapshotVersion are ignored, so bump it whenever `evolve` or
   * `initialState` changes what a fold produces.
   */
  readonly snapshotVersion?: number;
}

/** An aggregate type's snapshot settings, as validated by `Domain.aggregate`. */
export interface AggregateSnapshotOptions {
  /** Versions between two snapshots; undefined: the aggregate keeps no snapshots. */
  readonly snapshotEvery: number | undefined;
  /** The snapshotVersion snapshots are saved and read with (>= 1). */
  readonly snapshotVersion: number;
}

/**
 * The snapshot settings of an aggregate type: those `Domain.aggregate` was
 * given, or none (`snapshotEvery` undefined, `snapshotVersion` 1) for an
 * aggregate type made some other way.
 * @example
 * const { snapshotEvery, snapshotVersion } = snapshotOptionsOf(TodoAggregate);
 * if (snapshotEvery !== undefined && version % snapshotEvery === 0) await snapshots.save({ ..., version, snapshotVersion });
 */
export function snapshotOptionsOf(aggregate: AggregateType<any>): AggregateSnapshotOptions {
  const o = aggregate as Partial<AggregateSnapshotOptions>;
  const every = o.snapshotEvery;
  const version = o.snapshotVersion;
  return {
    snapshotEvery: typeof every === "number" && Number.isSafeInteger(every) && every >= 1 ? every : undefined,
    snapshotVersion: typeof version === "number" && Number.isSafeInteger(version) && version >= 1 ? version : 1,
  };
}

/** Validates the snapshot options of `Domain.aggregate` (INVALID_DOMAIN), with the default snapshotVersion 1. */
function checkSnapshotOptions(what: string, o: AggregateOptions<any, any>): AggregateSnapshotOptions {
  const every = o.snapshotEvery;
  if (every !== undefined && (typeof every !== "number" || !Number.isSafeInteger(every) || every < 1)) {
    throw new MnemeError("INVALID_DOMAIN", `${what}: snapshotEvery must be a positive integer, got ${describeValue(every)}`);
  }
  const version = o.snapshotVersion === undefined ? 1 : o.snapshotVersion;
  if (typeof version !== "number" || !Number.isSafeInteger(version) || version < 1) {
    throw new MnemeError("INVALID_DOMAIN", `${what}: snapshotVersion must be an integer >= 1, got ${describeValue(version)}`);
  }
  return { snapshotEvery: every, snapshotVersion: version };
}

/** A number as written, a string quoted, anything else by its type (a BigInt cannot go through JSON.stringify). */
function describeValue(v: unknown): string {
  if (typeof v === "number") return String(v);
  return typeof v === "string" ? JSON.stringify(v) : v === null ? "null" : typeof v;
}

/** What a domain holds, by name: its types, and the handlers and permissions attached to it. */
export interface DomainContents {
  readonly commands: ReadonlyMap<string, CommandType<any, any>>;
  readonly queries: ReadonlyMap<string, QueryType<any, any>>;
  readonly events: ReadonlyMap<string, EventType<any>>;
  readonly aggregates: ReadonlyMap<string, AggregateType<any>>;
  readonly commandHandlers: ReadonlyMap<string, CommandHandler>;
  readonly queryHandlers: ReadonlyMap<string, QueryHandler>;
  readonly permissions: ReadonlyMap<string, Permission>;
}

/**
 * A domain: its commands, queries, events, aggregates, handlers and
 * permissions. `E`, when given to `defineDomain`, maps event names to payload
 * types, so event names and evolve keys are checked by the compiler.
 */
export interface Domain<E extends Record<string, unknown> = Record<string, any>> extends DomainContents {
  readonly name: string;
  readonly description: string;
  /**
   * A command whose payload type is the input type of its Standard Schema
   * validator (zod 4, valibot, arktype, ...), which also validates payloads
   * and gives the Runtime its JSON Schema. A typed result:
   * `command<typeof Schema, Result>(name, { schema: Schema })`.
   */
  command<S extends StandardSchemaV1, R = unknown>(
    name: string,
    opts: CommandOptions<StandardSchemaV1.InferInput<S>> & { readonly schema: S },
  ): CommandType<StandardSchemaV1.InferInput<S>, R>;
  command<P, R = unknown>(name: string, opts?: CommandOptions<P>): CommandType<P, R>;
  /** A query whose payload type comes from its Standard Schema: `query<typeof Schema, Result>(name, { schema: Schema })`. */
  query<S extends StandardSchemaV1, R = unknown>(
    name: string,
    opts: QueryDefinitionOptions & { readonly schema: S },
  ): QueryType<StandardSchemaV1.InferInput<S>, R>;
  query<P, R>(name: string, opts?: QueryDefinitionOptions): QueryType<P, R>;
  /** An event whose payload type is the input type of its Standard Schema. */
  event<S extends StandardSchemaV1>(
    name: string,
    opts: EventOptions<StandardSchemaV1.InferInput<S>> & { readonly schema: S },
  ): EventType<StandardSchemaV1.InferInput<S>>;
  /** An event of the domain's event map (its payload type from the map). */
  event<K extends keyof E & string>(name: K, opts?: EventOptions<E[K]>): EventType<E[K]>;
  event<P>(name: string, opts?: EventOptions<P>): EventType<P>;
  /** An aggregate type; it carries its snapshot settings (see {@link snapshotOptionsOf}). */
  aggregate<S>(name: string, opts: AggregateOptions<S, E>): AggregateType<S> & AggregateSnapshotOptions;
  /**
   * Deprecated alias: attach
   * handlers in the install step, `facade.registerDomain(Todo, (d) => d.handleCommand(...))`
   * (docs/architecture.md, "One way"). Kept as an alias: applications written from earlier READMEs use it.
   */
  handleCommand<P>(type: CommandType<P, any>, fn: CommandHandler<P>): void;
  /** Deprecated alias: attach handlers in the install step, `facade.registerDomain(Todo, (d) => d.handleQuery(...))`. */
  handleQuery<P, R>(type: QueryType<P, R>, fn: QueryHandler<P, R>): void;
  /**
   * Deprecated: give the permission where the command or query is defined (`command("X", { permission })`), or,
   * for a function that needs one facade's parts, in the install step (`d.registerPermission`).
   * Attaches a permission (e.g. from newPermissionCmdFunc) to one of the domain's commands or queries before
   * the domain is registered, replacing the one its options gave. INVALID_PERMISSION when it is malformed.
   */
  registerPermission(p: Permission): void;
}

const NAME = /^[A-Za-z][A-Za-z0-9_]*$/;

/**
 * Checks an event's evolution options: `version` an integer >= 1, one upcaster
 * function for every older version and none for another, former names that are
 * identifiers. A gap in the chain is a definition-time error, not a replay-time surprise.
 */
function evolutionOf(
  what: string,
  o: EventOptions,
): { version: number; upcasters: Readonly<Record<number, Upcaster>>; renamedFrom: readonly string[] } {
  const version = o.version ?? 1;
  if (typeof version !== "number" || !Number.isSafeInteger(version) || version < 1) {
    throw new MnemeError("INVALID_DOMAIN", `${what}: version must be an integer >= 1, got ${JSON.stringify(version) ?? String(version)}`);
  }
  const given: unknown = o.upcasters ?? {};
  if (given === null || typeof given !== "object" || Array.isArray(given)) {
    throw new MnemeError("INVALID_DOMAIN", `${what}: upcasters must be an object { [olderVersion]: (payload) => nextPayload }`);
  }
  const upcasters: Record<number, Upcaster> = {};
  for (const [key, fn] of Object.entries(given as Record<string, unknown>)) {
    const v = Number(key);
    if (!Number.isSafeInteger(v) || String(v) !== key || v < 1 || v >= version) {
      throw new MnemeError(
        "INVALID_DOMAIN",
        `${what}: upcasters[${JSON.stringify(key)}] names no older version (versions 1 .. ${version - 1} have upcasters)`,
      );
    }
    if (typeof fn !== "function") throw new MnemeError("INVALID_DOMAIN", `${what}: upcasters[${v}] must be a function`);
    upcasters[v] = fn as Upcaster;
  }
  for (let v = 1; v < version; v++) {
    if (upcasters[v] === undefined) {
      throw new MnemeError(
        "INVALID_DOMAIN",
        `${what}: version ${version} needs an upcaster from version ${v} to ${v + 1} (upcasters[${v}])`,
      );
    }
  }
  const former = o.renamedFrom === undefined ? [] : typeof o.renamedFrom === "string" ? [o.renamedFrom] : o.renamedFrom;
  if (!Array.isArray(former)) throw new MnemeError("INVALID_DOMAIN", `${what}: renamedFrom must be a name or an array of names`);
  for (const n of former as unknown[]) {
    if (typeof n !== "string" || !NAME.test(n))
      throw new MnemeError("INVALID_DOMAIN", `${what}: renamedFrom ${JSON.stringify(n)} is not an event name`);
  }
  return { version, upcasters: Object.freeze(upcasters), renamedFrom: Object.freeze([...new Set(former as string[])]) };
}

/**
 * Checks `personalData` (INVALID_DOMAIN): a subject function and at least one
 * field, each a top-level name or a JSON pointer, none repeated or inside
 * another. Returns the fields as JSON pointers.
 */
function personalDataOf(what: string, given: unknown): PersonalData | undefined {
  if (given === undefined) return undefined;
  if (given === null || typeof given !== "object") {
    throw new MnemeError("INVALID_DOMAIN", `${what}: personalData must be { subject: (payload) => id, fields: [...] }`);
  }
  const { subject, fields } = given as { subject?: unknown; fields?: unknown };
  if (typeof subject !== "function") throw new MnemeError("INVALID_DOMAIN", `${what}: personalData.subject must be a function`);
  if (!Array.isArray(fields) || fields.length === 0) {
    throw new MnemeError("INVALID_DOMAIN", `${what}: personalData.fields must be a non-empty array of field names or JSON pointers`);
  }
  const pointers: string[] = [];
  for (const f of fields as unknown[]) {
    if (typeof f !== "string" || f === "" || f === "/") {
      throw new MnemeError("INVALID_DOMAIN", `${what}: personalData field ${JSON.stringify(f) ?? String(f)} must name a field`);
    }
    if (f.startsWith("/") && (/~[^01]|~$/.test(f) || f.split("/").slice(1).includes(""))) {
      throw new MnemeError(
        "INVALID_DOMAIN",
        `${what}: personalData field ${JSON.stringify(f)} is not a JSON pointer (empty token, or ~ not followed by 0 or 1)`,
      );
    }
    const pointer = f.startsWith("/") ? f : `/${f.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    for (const p of pointers) {
      if (p === pointer || pointer.startsWith(`${p}/`) || p.startsWith(`${pointer}/`)) {
        throw new MnemeError("INVALID_DOMAIN", `${what}: personalData fields ${JSON.stringify(p)} and ${JSON.stringify(f)} overlap`);
      }
    }
    pointers.push(pointer);
  }
  return Object.freeze({ subject: subject as PersonalData["subject"], fields: Object.freeze(pointers) });
}

function checkName(what: string, name: string): void {
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new MnemeError(
      "INVALID_DOMAIN",
      `${what} name ${JSON.stringify(name)} must be an identifier (letters, digits, _; starting with a letter)`,
    );
  }
}

/** What one domain definition holds while it is being defined: the maps its Domain object exposes. */
interface DomainState {
  readonly name: string;
  readonly commands: Map<string, CommandType<any, any>>;
  readonly queries: Map<string, QueryType<any, any>>;
  readonly events: Map<string, EventType<any>>;
  /** Former names of this domain's events (renamedFrom): taken, like event names. */
  readonly formerNames: Set<string>;
  readonly aggregates: Map<string, AggregateType<any>>;
  readonly commandHandlers: Map<string, CommandHandler>;
  readonly queryHandlers: Map<string, QueryHandler>;
  readonly permissions: Map<string, Permission>;
}

const taken = (d: DomainState, n: string) => d.commands.has(n) || d.queries.has(n);

/**
 * Defines a domain. Register it with `facade.registerDomain(domain)`. Give
 * the domain's event map as the type argument and the compiler checks event
 * names and evolve keys (a typo such as `Opend` is a type error) and types
 * each evolver's payload; without it, registration still rejects an evolve
 * key that names no event.
 * @example
 * const Todo = defineDomain("Todo", { description: "Todo items" });
 * const CreateTodo = Todo.command<CreateTodo>("CreateTodo", { description: "Create a todo" });
 * const Typed = defineDomain<{ TodoCreated: TodoCreated }>("Todo");
 * const TodoCreated = Typed.event("TodoCreated");   // EventType<TodoCreated>
 */
export function defineDomain<E extends Record<string, unknown> = Record<string, any>>(
  name: string,
  opts: { description?: string } = {},
): Domain<E> {
  checkName("domain", name);
  const d: DomainState = {
    name,
    commands: new Map(),
    queries: new Map(),
    events: new Map(),
    formerNames: new Set(),
    aggregates: new Map(),
    commandHandlers: new Map(),
    queryHandlers: new Map(),
    permissions: new Map(),
  };
  return {
    name,
    description: opts.description ?? `${name} domain`,
    commands: d.commands,
    queries: d.queries,
    events: d.events,
    aggregates: d.aggregates,
    commandHandlers: d.commandHandlers,
    queryHandlers: d.queryHandlers,
    permissions: d.permissions,
    command: <P, R = unknown>(cmdName: string, o: CommandOptions<P> = {}) => defineCommand<P, R>(d, cmdName, o),
    query: <P, R>(qryName: string, o: QueryDefinitionOptions = {}) => defineQuery<P, R>(d, qryName, o),
    event: <P>(evtName: string, o: EventOptions<P> = {}) => defineEvent<P>(d, evtName, o),
    aggregate: <S>(aggName: string, o: AggregateOptions<S, E>) => defineAggregate<S, E>(d, aggName, o),
    handleCommand: <P>(type: CommandType<P, any>, fn: CommandHandler<P>) => attachHandler(d, "command", type, fn),
    handleQuery: <P, R>(type: QueryType<P, R>, fn: QueryHandler<P, R>) => attachHandler(d, "query", type, fn),
    registerPermission: (p: Permission) => attachPermission(d, p),
  } as Domain<E>;
}

function defineCommand<P, R>(d: DomainState, cmdName: string, o: CommandOptions<P>): CommandType<P, R> {
  const name = d.name;
  checkName("command", cmdName);
  if (taken(d, cmdName)) throw new MnemeError("INVALID_DOMAIN", `${name}.${cmdName} is defined twice`);
  const permission = o.permission ?? authorized;
  const personalData = personalDataOf(`command ${name}.${cmdName}`, o.personalData) as CommandPersonalData<P> | undefined;
  const type: CommandType<P, R> = Object.freeze({
    kind: "command" as const,
    domain: name,
    name: cmdName,
    description: o.description ?? `${cmdName} command of ${name}`,
    permission,
    secretFields: Object.freeze([...(o.secretFields ?? [])]),
    ...(o.schema === undefined ? {} : { schema: o.schema }),
    ...resultSchemaOf(`${name}.${cmdName}`, o.resultSchema),
    ...(personalData === undefined ? {} : { personalData }),
  });
  d.commands.set(cmdName, type);
  d.permissions.set(cmdName, newPermission(name, cmdName, type.description, permission));
  return type;
}

/** `resultSchema` checked: a JSON Schema object (INVALID_DOMAIN otherwise), frozen; nothing when absent. */
function resultSchemaOf(what: string, schema: unknown): { resultSchema?: JsonSchema } {
  if (schema === undefined) return {};
  if (typeof schema !== "object" || schema === null || Array.isArray(schema) || isStandardSchema(schema))
    throw new MnemeError("INVALID_DOMAIN", `${what}: resultSchema must be a JSON Schema object`);
  return { resultSchema: Object.freeze(structuredClone(schema as JsonSchema)) };
}

function defineQuery<P, R>(d: DomainState, qryName: string, o: QueryDefinitionOptions): QueryType<P, R> {
  const name = d.name;
  checkName("query", qryName);
  if (taken(d, qryName)) throw new MnemeError("INVALID_DOMAIN", `${name}.${qryName} is defined twice`);
  const permission = o.permission ?? authorized;
  const live = liveSettingsOf(`${name}.${qryName}`, o.live);
  const type: QueryType<P, R> = Object.freeze({
    kind: "query" as const,
    domain: name,
    name: qryName,
    description: o.description ?? `${qryName} query of ${name}`,
    permission,
    secretFields: Object.freeze([...(o.secretFields ?? [])]),
    ...(o.schema === undefined ? {} : { schema: o.schema }),
    ...(live === undefined ? {} : { live }),
    ...resultSchemaOf(`${name}.${qryName}`, o.resultSchema),
  });
  d.queries.set(qryName, type);
  d.permissions.set(qryName, newPermission(name, qryName, type.description, permission));
  return type;
}

/** The options of `live` besides `true`: see LiveQuerySettings. */
export interface LiveQueryOptions {
  readonly readmodels?: readonly string[];
  readonly share?: "sender" | "tenant";
  readonly allTenants?: boolean;
  readonly systemEvents?: readonly SystemEventKind[];
  readonly everyMs?: number;
  readonly minIntervalMs?: number;
}

const LIVE_OPTIONS = ["readmodels", "share", "allTenants", "systemEvents", "everyMs", "minIntervalMs"];
/** The longest `everyMs` / `minIntervalMs`: a day (a setTimeout beyond 2^31 ms would fire at once). */
const MAX_LIVE_MS = 86_400_000;

/** The `live` option of a query, checked: INVALID_DOMAIN for anything but a boolean or LiveQueryOptions. */
function liveSettingsOf(path: string, live: QueryDefinitionOptions["live"]): LiveQuerySettings | undefined {
  if (live === undefined || live === false) return undefined;
  if (live === true) return Object.freeze({ share: "sender" as const });
  const bad = (what: string) => new MnemeError("INVALID_DOMAIN", `query ${path}: ${what}`);
  if (typeof live !== "object" || live === null || Array.isArray(live))
    throw bad(`live must be a boolean or { ${LIVE_OPTIONS.join(", ")} }`);
  for (const k of Object.keys(live)) {
    if (!LIVE_OPTIONS.includes(k)) throw bad(`live has no option ${JSON.stringify(k)} (allowed: ${LIVE_OPTIONS.join(", ")})`);
  }
  const share = live.share ?? "sender";
  if (share !== "sender" && share !== "tenant") throw bad(`live.share must be "sender" or "tenant" (got ${JSON.stringify(share)})`);
  const out: { -readonly [K in keyof LiveQuerySettings]: LiveQuerySettings[K] } = { share };
  const { readmodels, allTenants, systemEvents, everyMs, minIntervalMs } = live;
  if (readmodels !== undefined) {
    if (!Array.isArray(readmodels) || readmodels.some((r) => typeof r !== "string" || r === ""))
      throw bad("live.readmodels must be an array of readmodel names");
    out.readmodels = Object.freeze([...readmodels]);
  }
  if (allTenants !== undefined) {
    if (typeof allTenants !== "boolean") throw bad("live.allTenants must be a boolean");
    if (allTenants) out.allTenants = true;
  }
  if (systemEvents !== undefined) {
    const known: readonly string[] = SYSTEM_EVENT_KINDS;
    if (!Array.isArray(systemEvents) || systemEvents.length === 0 || systemEvents.some((k) => !known.includes(k)))
      throw bad(`live.systemEvents must be a non-empty array of system event kinds (${known.join(", ")})`);
    out.systemEvents = Object.freeze([...new Set(systemEvents)]);
  }
  for (const [key, v] of [
    ["everyMs", everyMs],
    ["minIntervalMs", minIntervalMs],
  ] as const) {
    if (v === undefined) continue;
    if (!Number.isInteger(v) || v < 1 || v > MAX_LIVE_MS) throw bad(`live.${key} must be an integer from 1 to ${MAX_LIVE_MS} (ms)`);
    out[key] = v;
  }
  if (out.readmodels?.length === 0 && out.systemEvents === undefined && out.everyMs === undefined)
    throw bad("live.readmodels is empty and no other signal (systemEvents, everyMs) is named: it would never run again");
  return Object.freeze(out);
}

function defineEvent<P>(d: DomainState, evtName: string, o: EventOptions<P>): EventType<P> {
  const name = d.name;
  checkName("event", evtName);
  if (d.events.has(evtName) || d.formerNames.has(evtName)) {
    throw new MnemeError("INVALID_DOMAIN", `event ${name}.${evtName} is defined twice (or is a former name of another event)`);
  }
  const path = `${name}.${evtName}`;
  const { version, upcasters, renamedFrom } = evolutionOf(`event ${path}`, o);
  for (const former of renamedFrom) {
    if (d.events.has(former) || d.formerNames.has(former) || former === evtName) {
      throw new MnemeError("INVALID_DOMAIN", `event ${path}: renamedFrom ${JSON.stringify(former)} names an event of ${name} already`);
    }
  }
  const personalData = personalDataOf(`event ${path}`, o.personalData);
  if (o.tags !== undefined && typeof o.tags !== "function") {
    throw new MnemeError("INVALID_DOMAIN", `event ${path}: tags must be a function of the payload returning "key:value" strings`);
  }
  const retainForMs = o.retainFor === undefined ? undefined : retentionMs(o.retainFor, `event ${path}`);
  for (const former of renamedFrom) d.formerNames.add(former);
  const type: EventType<P> = Object.freeze({
    kind: "event" as const,
    domain: name,
    name: evtName,
    path,
    description: o.description ?? `${evtName} event of ${name}`,
    ...(o.schema === undefined ? {} : { schema: o.schema }),
    version,
    upcasters,
    renamedFrom,
    ...(personalData === undefined ? {} : { personalData }),
    ...(o.tags === undefined ? {} : { tags: o.tags }),
    ...(retainForMs === undefined ? {} : { retainForMs }),
    create(aggregateUuid: string, payload: P, c: { version?: number; tenantUuid?: string; reqCtx?: RequestContext } = {}): NewEvent<P> {
      const e: NewEvent<P> = { domain: name, name: evtName, aggregateUuid, payload };
      if (c.version !== undefined) e.version = c.version;
      if (c.tenantUuid !== undefined) e.tenantUuid = c.tenantUuid;
      if (c.reqCtx !== undefined) e.reqCtx = c.reqCtx;
      // Written in the current version, whoever appends it (dispatch, scenario.given, a tool).
      if (version !== 1) e.eventVersion = version;
      return e;
    },
    is(event: Event): event is Event<P> {
      return event.domain === name && event.name === evtName;
    },
  });
  d.events.set(evtName, type);
  return type;
}

function defineAggregate<S, E>(d: DomainState, aggName: string, o: AggregateOptions<S, E>): AggregateType<S> & AggregateSnapshotOptions {
  const name = d.name;
  const what = `aggregate ${name}.${aggName}`;
  checkName("aggregate", aggName);
  if (d.aggregates.has(aggName)) throw new MnemeError("INVALID_DOMAIN", `${what} is defined twice`);
  if (typeof o.initialState !== "function") throw new MnemeError("INVALID_DOMAIN", `${what} needs an initialState function`);
  const tenancy = o.tenancy ?? "tenant";
  if (tenancy !== "tenant" && tenancy !== "global") {
    throw new MnemeError("INVALID_DOMAIN", `${what}: tenancy must be "tenant" or "global", got ${JSON.stringify(tenancy)}`);
  }
  const snapshots = checkSnapshotOptions(what, o);
  const evolve = Object.freeze(evolveMapOf(d, what, o.evolve));
  for (const [key, fn] of Object.entries(evolve)) {
    if (typeof fn !== "function") throw new MnemeError("INVALID_DOMAIN", `${what}: evolve.${key} must be a function`);
  }
  const type: AggregateType<S> & AggregateSnapshotOptions = Object.freeze({
    kind: "aggregate" as const,
    domain: name,
    name: aggName,
    tenancy,
    snapshotEvery: snapshots.snapshotEvery,
    snapshotVersion: snapshots.snapshotVersion,
    initialState: o.initialState,
    evolve,
    apply(state: S, event: Event): S {
      const fn = (event.domain === name ? evolve[event.name] : undefined) ?? evolve[`${event.domain}.${event.name}`];
      return fn === undefined ? state : fn(state, event.payload, event);
    },
  });
  d.aggregates.set(aggName, type);
  return type;
}

/**
 * The evolve map of an aggregate, from any of the three forms. Steps are keyed
 * as the object form is (name for this domain's events, path for others'), so
 * registration checks them the same way; a token of this domain must be the one
 * its `event()` made, and an event evolved twice is INVALID_DOMAIN.
 */
function evolveMapOf<S, E>(d: DomainState, what: string, given: AggregateOptions<S, E>["evolve"]): Record<string, Evolver<S>> {
  const form = typeof given === "function" ? given(on) : given;
  if (form === null || typeof form !== "object") {
    throw new MnemeError(
      "INVALID_DOMAIN",
      `${what} needs evolve: an object of evolvers, an array of on(EventToken, fn) steps, or a function returning one`,
    );
  }
  if (!Array.isArray(form)) return { ...(form as Record<string, Evolver<S>>) };
  const out: Record<string, Evolver<S>> = {};
  (form as readonly unknown[]).forEach((item, i) => {
    const step = evolveStepOf<S>(d, `${what}: evolve[${i}]`, item);
    const ev = step.event;
    const key = ev.domain === d.name ? ev.name : ev.path;
    if (Object.hasOwn(out, key)) throw new MnemeError("INVALID_DOMAIN", `${what}: evolve[${i}]: ${ev.path} is evolved twice`);
    out[key] = step.evolve;
  });
  return out;
}

/** One `on(EventToken, fn)` step of an evolve array, checked (INVALID_DOMAIN). */
function evolveStepOf<S>(d: DomainState, at: string, item: unknown): EvolveStep<S> {
  const step = item as Partial<EvolveStep<S>> | null;
  if (step === null || typeof step !== "object" || step.kind !== "evolveStep") {
    throw new MnemeError("INVALID_DOMAIN", `${at} must be made by on(EventToken, fn)`);
  }
  const ev = step.event as EventType | null | undefined;
  if (ev === null || typeof ev !== "object" || ev.kind !== "event") {
    throw new MnemeError(
      "INVALID_DOMAIN",
      `${at}: on(...) needs an event token (from a domain's event()), got ${ev === null || ev === undefined ? String(ev) : JSON.stringify((ev as { kind?: unknown }).kind ?? typeof ev)}`,
    );
  }
  if (typeof step.evolve !== "function") throw new MnemeError("INVALID_DOMAIN", `${at}: on(${ev.path}, fn): fn must be a function`);
  if (ev.domain === d.name && d.events.get(ev.name) !== ev) {
    throw new MnemeError(
      "INVALID_DOMAIN",
      `${at}: the token ${ev.path} was made by another domain object named ${d.name}, not by this one`,
    );
  }
  return step as EvolveStep<S>;
}

/** `Domain.handleCommand` / `handleQuery`: one handler per command or query of this definition. */
function attachHandler(d: DomainState, kind: "command" | "query", type: CommandType<any, any> | QueryType<any, any>, fn: unknown): void {
  const [types, handlers] = kind === "command" ? [d.commands, d.commandHandlers] : [d.queries, d.queryHandlers];
  if (type.domain !== d.name || types.get(type.name) !== type) {
    throw new MnemeError("INVALID_DOMAIN", `${kind} ${type.domain}.${type.name} is not a ${kind} of domain ${d.name}`);
  }
  if (handlers.has(type.name)) throw new MnemeError("INVALID_DOMAIN", `${kind} ${d.name}.${type.name} has a handler already`);
  (handlers as Map<string, unknown>).set(type.name, fn);
}

function attachPermission(d: DomainState, p: Permission): void {
  const checked = checkPermission(p); // a custom permission with a built-in level function becomes that level
  if (checked.domain !== d.name)
    throw new MnemeError("INVALID_PERMISSION", `permission for domain ${checked.domain} registered on domain ${d.name}`);
  if (!taken(d, checked.type))
    throw new MnemeError("INVALID_PERMISSION", `${d.name} has no command or query ${checked.type} to attach a permission to`);
  d.permissions.set(checked.type, checked);
}
