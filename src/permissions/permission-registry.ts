import { isMnemeError, MnemeError } from "../model/errors.js";
import type { CommandEnvelope, QueryEnvelope, RequestContext } from "../model/types.js";
import { serviceVerdict, type ServicePrincipal } from "../model/service-principal.js";
import {
  authorized,
  checkPermission,
  type Permission,
  type PermissionContext,
  type PermissionFunc,
  permissionFuncOf,
} from "../model/permission.js";

/**
 * An RBAC hook consulted after the `authorized` level passes and for every
 * store permission. Nothing allows, an Error (returned or thrown) denies.
 */
export type Authorizer = (
  reqCtx: RequestContext,
  permission: Permission,
  envelope: CommandEnvelope | QueryEnvelope,
) => void | Error | Promise<void | Error>;

/** The central permission registry: one entry per (domain, type). */
export class PermissionRegistry {
  readonly #byDomain = new Map<string, Map<string, Permission>>();
  readonly #services = new Map<string, ServicePrincipal>();
  #authorizer: Authorizer | undefined;
  readonly #context: PermissionContext | undefined;

  /** `context` is passed to every permission function (the facade passes itself). */
  constructor(authorizer?: Authorizer, context?: PermissionContext) {
    this.#authorizer = authorizer;
    this.#context = context;
  }

  /** Installs (or replaces) the authorizer, e.g. from registerDefaults. */
  setAuthorizer(authorizer: Authorizer | undefined): void {
    this.#authorizer = authorizer;
  }

  get authorizer(): Authorizer | undefined {
    return this.#authorizer;
  }

  /**
   * Validates and adds a permission (a frozen copy). INVALID_PERMISSION on empty fields, a field that
   * contradicts the permission's `kind`, or a duplicate (domain, type). A custom permission whose cmdFunc
   * is a built-in level function is stored as that level, so `authorized` always consults the authorizer.
   */
  register(p: Permission): void {
    const checked = checkPermission(p);
    let types = this.#byDomain.get(checked.domain);
    if (types === undefined) {
      types = new Map();
      this.#byDomain.set(checked.domain, types);
    }
    if (types.has(checked.type))
      throw new MnemeError("INVALID_PERMISSION", `permission ${checked.domain}.${checked.type} is registered already`);
    types.set(checked.type, checked);
  }

  /**
   * Registers a service principal (a process manager or reactor does, with
   * its `service` option): request contexts naming it get exactly its
   * commands. The same name again must come with the same commands (INVALID_PERMISSION otherwise).
   */
  registerService(service: ServicePrincipal): void {
    const known = this.#services.get(service.name);
    if (known !== undefined && known.commands.join(",") !== service.commands.join(","))
      throw new MnemeError("INVALID_PERMISSION", `service ${service.name} is registered already with other commands`);
    this.#services.set(service.name, service);
  }

  /** True when (domain, type) is registered. */
  has(domain: string, type: string): boolean {
    return this.#byDomain.get(domain)?.has(type) ?? false;
  }

  get(domain: string, type: string): Permission | undefined {
    return this.#byDomain.get(domain)?.get(type);
  }

  list(filter: { domain?: string; type?: string } = {}): Permission[] {
    const out: Permission[] = [];
    for (const [domain, types] of this.#byDomain) {
      if (filter.domain !== undefined && domain !== filter.domain) continue;
      for (const p of types.values()) if (filter.type === undefined || p.type === filter.type) out.push(p);
    }
    return out;
  }

  /**
   * Resolves when the envelope may run, rejects with a MnemeError otherwise.
   * By kind: a custom function decides alone; a level's function decides, for
   * `Authorized` followed by the authorizer; an administrator permission is
   * granted by the authorizer only. No permission (or no authorizer for an
   * administrator permission) is denied.
   */
  check(reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope): Promise<void> {
    // Not an async function: a synchronous allow costs no extra promise (this runs before every command and query).
    let outcome: Outcome;
    try {
      outcome = this.evaluate(reqCtx, envelope);
    } catch (e) {
      // A throwing custom function: its error (whatever it is) is what the caller gets, as from evaluate.
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      return Promise.reject(e);
    }
    if (outcome === undefined) return ALLOWED;
    if (outcome instanceof Promise) return outcome.then(rejectDenial);
    return Promise.reject(outcome);
  }

  /**
   * Resolves when the authorizer grants `envelope` as it grants an
   * administrator permission (no level: with the default authorizer, system
   * administrators only); rejects with PERMISSION_DENIED otherwise, and always
   * without an authorizer. How `allTenants: true` widens a Runtime list, as
   * the system-event stream's all-tenant view is decided: the authorizer sees
   * the envelope with its payload.
   */
  async checkAdministrator(reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope): Promise<void> {
    // A service administers nothing: its grant is its own list of commands, in its own tenant.
    if (reqCtx.senderService !== undefined)
      throw new MnemeError("PERMISSION_DENIED", `service ${String(reqCtx.senderService)} acts in its own tenant only`);
    const p = this.#byDomain.get(envelope.domain)?.get(envelope.name);
    if (p === undefined) throw new MnemeError("PERMISSION_DENIED", `no permission is registered for ${envelope.domain}.${envelope.name}`);
    if (this.#authorizer === undefined)
      throw new MnemeError(
        "PERMISSION_DENIED",
        `${p.domain}.${p.type} across tenants is granted only by an authorizer, and none is installed`,
      );
    const asAdministrator: Permission = {
      kind: "administrator",
      domain: p.domain,
      type: p.type,
      description: p.description,
      funcSet: false,
    };
    rejectDenial(await consult(asAdministrator, this.#authorizer, reqCtx, envelope));
  }

  /**
   * Resolves when `envelope` passes the `Authorized` level and the authorizer
   * grants it as a permission of that level (with the default authorizer: an
   * identity whose groups hold the permission, in its own tenant); rejects
   * with PERMISSION_DENIED otherwise, and always without an authorizer. How a
   * custom permission admits a tenant's administrator besides the system's.
   */
  async checkGranted(reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope): Promise<void> {
    const p = this.#byDomain.get(envelope.domain)?.get(envelope.name);
    if (p === undefined) throw new MnemeError("PERMISSION_DENIED", `no permission is registered for ${envelope.domain}.${envelope.name}`);
    if (this.#authorizer === undefined)
      throw new MnemeError("PERMISSION_DENIED", `${p.domain}.${p.type} is granted only by an authorizer, and none is installed`);
    const asLevel: Permission = {
      kind: "level",
      level: "Authorized",
      domain: p.domain,
      type: p.type,
      description: p.description,
      funcSet: false,
    };
    rejectDenial(await run(asLevel, authorized, reqCtx, envelope, this.#context, this.#authorizer));
  }

  /**
   * The check without the promise where every step is synchronous: returns
   * undefined (allow), a MnemeError (deny), or a promise of either.
   */
  evaluate(reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope): MnemeError | undefined | Promise<MnemeError | undefined> {
    const p = this.#byDomain.get(envelope.domain)?.get(envelope.name);
    if (p === undefined) return new MnemeError("PERMISSION_DENIED", `no permission is registered for ${envelope.domain}.${envelope.name}`);
    // A service's grant is its list of commands, whatever else the message's permission would ask.
    if (reqCtx.senderService !== undefined) return serviceVerdict(this.#services, reqCtx, envelope);
    switch (p.kind) {
      case "custom":
        // A custom function decides alone.
        return run(p, p.cmdFunc, reqCtx, envelope, this.#context, undefined);
      case "level":
        // The level's function; for Authorized, then the authorizer.
        return run(p, permissionFuncOf(p), reqCtx, envelope, this.#context, p.level === "Authorized" ? this.#authorizer : undefined);
      case "administrator":
        // No level and no function (store permissions, Runtime control): only the authorizer grants.
        if (this.#authorizer === undefined) {
          return new MnemeError("PERMISSION_DENIED", `${p.domain}.${p.type} is granted only by an authorizer, and none is installed`);
        }
        return consult(p, this.#authorizer, reqCtx, envelope);
    }
  }
}

type Outcome = MnemeError | undefined | Promise<MnemeError | undefined>;

const ALLOWED: Promise<void> = Promise.resolve();

/** Runs a permission function; `then` (the authorizer, for Authorized) is consulted when it allows. */
function run(
  p: Permission,
  fn: PermissionFunc,
  reqCtx: RequestContext,
  envelope: CommandEnvelope | QueryEnvelope,
  context: PermissionContext | undefined,
  then: Authorizer | undefined,
): Outcome {
  let r: unknown;
  try {
    r = fn(reqCtx, envelope, context);
  } catch (e) {
    return toDenial(p, e);
  }
  return isThenable(r)
    ? Promise.resolve(r).then(
        (v) => verdict(p, v, reqCtx, envelope, then),
        (e: unknown) => toDenial(p, e),
      )
    : verdict(p, r, reqCtx, envelope, then);
}

function rejectDenial(denied: MnemeError | undefined): void {
  if (denied !== undefined) throw denied;
}

/** Nothing allows (then the authorizer, if any); an Error denies; anything else denies too (deny is the default). */
function verdict(
  p: Permission,
  r: unknown,
  reqCtx: RequestContext,
  envelope: CommandEnvelope | QueryEnvelope,
  then: Authorizer | undefined,
): Outcome {
  if (r === undefined) return then === undefined ? undefined : consult(p, then, reqCtx, envelope);
  if (r instanceof Error) return toDenial(p, r);
  // e.g. `(ctx) => ctx.senderAccountUuid === admin`: a boolean type-checks as void, and must not allow.
  return new MnemeError(
    "PERMISSION_DENIED",
    `permission denied for ${p.domain}.${p.type}: its permission function returned ${describe(r)}; return nothing to allow or an Error to deny`,
  );
}

function consult(p: Permission, authorizer: Authorizer, reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope): Outcome {
  let r: unknown;
  try {
    r = authorizer(reqCtx, p, envelope);
  } catch (e) {
    return toDenial(p, e);
  }
  return isThenable(r)
    ? Promise.resolve(r).then(
        (v) => verdict(p, v, reqCtx, envelope, undefined) as MnemeError | undefined,
        (e: unknown) => toDenial(p, e),
      )
    : verdict(p, r, reqCtx, envelope, undefined);
}

function isThenable(r: unknown): r is PromiseLike<unknown> {
  return r instanceof Promise || (typeof r === "object" && r !== null && typeof (r as { then?: unknown }).then === "function");
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (typeof v === "function") return "a function";
  return typeof v === "object" ? "an object" : `${typeof v} ${String(v as string | number | boolean | bigint | symbol | undefined)}`;
}

function toDenial(p: Permission, e: unknown): MnemeError {
  if (isMnemeError(e)) return e;
  const reason = e instanceof Error ? e.message : String(e);
  return new MnemeError("PERMISSION_DENIED", `permission denied for ${p.domain}.${p.type}: ${reason}`, { cause: e });
}
