import type { CommandHandler, CommandHandlerResult, Domain, DomainContents, QueryHandler } from "./domain.js";
import { MnemeError } from "./errors.js";
import { checkPermission, type Permission } from "./permission.js";
import type { CommandContext } from "./context.js";
import type { CommandType, QueryType } from "./tokens.js";
import type { CommandEnvelope } from "./types.js";

/**
 * A command handler typed by its command's payload and result: what it returns
 * as `result` must be the token's result type.
 */
export type TypedCommandHandler<P, R> = (
  ctx: CommandContext,
  cmd: CommandEnvelope<P>,
  payload: P,
) => CommandHandlerResult<R> | Promise<CommandHandlerResult<R>>;

/**
 * What an install step attaches to a domain in one facade: handlers and, where a
 * permission function needs what only the install step has, permissions. Given
 * to the install function of `facade.registerDomain(domain, install)`; closed
 * once the install function returns.
 */
export interface DomainInstaller {
  /** The definition being installed. */
  readonly domain: Domain<any>;
  handleCommand<P, R>(type: CommandType<P, R>, fn: TypedCommandHandler<P, R>): void;
  handleQuery<P, R>(type: QueryType<P, R>, fn: QueryHandler<P, R>): void;
  /** Replaces, in this facade only, the permission the definition gives one of its commands or queries. */
  registerPermission(p: Permission): void;
}

/**
 * A domain's install step: attaches its handlers in one facade. Write it as a
 * function of what the handlers need, and install with a closure:
 * @example
 * export function installTodo(d: DomainInstaller, todos: TodoProjection): void {
 *   d.handleQuery(GetTodo, (ctx, _q, p) => ctx.readmodel(todos).getModel(p.todoUuid));
 * }
 * facade.registerDomain(Todo, (d) => installTodo(d, todos));
 */
export type DomainInstall = (installer: DomainInstaller) => void;

/**
 * A domain as one facade holds it: the definition's types, and the handlers and
 * permissions installed in this facade (the install step's, then those attached
 * to the definition itself).
 */
export interface InstalledDomain extends DomainContents {
  readonly name: string;
  readonly description: string;
  /** The definition (what `defineDomain` returned). */
  readonly definition: Domain<any>;
}

/**
 * Runs `install` for one facade and returns the installed domain. Nothing of the
 * definition changes, so a definition installs in any number of facades, each
 * with its own handlers. INVALID_DOMAIN for a type of another definition or a
 * second handler of one type (the definition's own included); INVALID_PERMISSION
 * as `Domain.registerPermission`.
 */
export function installDomain(domain: Domain<any>, install?: DomainInstall): InstalledDomain {
  const name = domain.name;
  const commandHandlers = new Map<string, CommandHandler>();
  const queryHandlers = new Map<string, QueryHandler>();
  const permissions = new Map<string, Permission>();
  let open = true;
  const assertOpen = (what: string) => {
    if (!open)
      throw new MnemeError(
        "INVALID_STATE",
        `${what}: the install step of domain ${name} is over (attach handlers inside the install function)`,
      );
  };
  const installer: DomainInstaller = {
    domain,
    handleCommand(type, fn) {
      assertOpen("handleCommand");
      if (type?.domain !== name || domain.commands.get(type.name) !== type) {
        throw new MnemeError("INVALID_DOMAIN", `command ${type?.domain}.${type?.name} is not a command of domain ${name}`);
      }
      if (commandHandlers.has(type.name) || domain.commandHandlers.has(type.name)) {
        throw new MnemeError("INVALID_DOMAIN", `command ${name}.${type.name} has a handler already`);
      }
      if (typeof fn !== "function")
        throw new MnemeError("INVALID_DOMAIN", `the handler of command ${name}.${type.name} must be a function`);
      commandHandlers.set(type.name, fn as CommandHandler);
    },
    handleQuery(type, fn) {
      assertOpen("handleQuery");
      if (type?.domain !== name || domain.queries.get(type.name) !== type) {
        throw new MnemeError("INVALID_DOMAIN", `query ${type?.domain}.${type?.name} is not a query of domain ${name}`);
      }
      if (queryHandlers.has(type.name) || domain.queryHandlers.has(type.name)) {
        throw new MnemeError("INVALID_DOMAIN", `query ${name}.${type.name} has a handler already`);
      }
      if (typeof fn !== "function") throw new MnemeError("INVALID_DOMAIN", `the handler of query ${name}.${type.name} must be a function`);
      queryHandlers.set(type.name, fn as QueryHandler);
    },
    registerPermission(p) {
      assertOpen("registerPermission");
      const checked = checkPermission(p); // as Domain.registerPermission: a built-in level function becomes that level
      if (checked.domain !== name)
        throw new MnemeError("INVALID_PERMISSION", `permission for domain ${checked.domain} installed on domain ${name}`);
      if (!domain.commands.has(checked.type) && !domain.queries.has(checked.type)) {
        throw new MnemeError("INVALID_PERMISSION", `${name} has no command or query ${checked.type} to attach a permission to`);
      }
      permissions.set(checked.type, checked);
    },
  };
  try {
    if (install !== undefined) {
      if (typeof install !== "function") throw new MnemeError("INVALID_DOMAIN", `the install step of domain ${name} must be a function`);
      install(installer);
    }
  } finally {
    open = false;
  }
  const mergedPermissions = new Map(domain.permissions);
  for (const [type, p] of permissions) mergedPermissions.set(type, p);
  return Object.freeze({
    name,
    description: domain.description,
    definition: domain,
    commands: domain.commands,
    queries: domain.queries,
    events: domain.events,
    aggregates: domain.aggregates,
    commandHandlers: new LayeredMap(commandHandlers, domain.commandHandlers),
    queryHandlers: new LayeredMap(queryHandlers, domain.queryHandlers),
    permissions: mergedPermissions,
  });
}

/** The installed handlers over the definition's (read live, as the facade always has). */
class LayeredMap<K, V> implements ReadonlyMap<K, V> {
  constructor(
    readonly top: ReadonlyMap<K, V>,
    readonly below: ReadonlyMap<K, V>,
  ) {}

  get(key: K): V | undefined {
    return this.top.get(key) ?? this.below.get(key);
  }

  has(key: K): boolean {
    return this.top.has(key) || this.below.has(key);
  }

  get size(): number {
    let n = this.top.size;
    for (const k of this.below.keys()) if (!this.top.has(k)) n++;
    return n;
  }

  *entries(): MapIterator<[K, V]> {
    yield* this.top.entries();
    for (const e of this.below.entries()) if (!this.top.has(e[0])) yield e;
  }

  *keys(): MapIterator<K> {
    for (const [k] of this.entries()) yield k;
  }

  *values(): MapIterator<V> {
    for (const [, v] of this.entries()) yield v;
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }

  forEach(fn: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const [k, v] of this.entries()) fn.call(thisArg, v, k, this);
  }
}
