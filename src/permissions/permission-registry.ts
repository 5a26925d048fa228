import { isMnemeError, MnemeError } from "../model/errors.js";
import type { CommandEnvelope, QueryEnvelope, RequestContext } from "../model/types.js";
import { type Permission, type PermissionContext, permissionLevelOf } from "../model/permission.js";

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
   * Validates and adds a permission. INVALID_PERMISSION on empty fields, a duplicate (domain, type), or a
   * custom cmdFunc without funcSet. A built-in level function is stored as that level (funcSet false), so
   * `authorized` always consults the authorizer, however the permission was made.
   */
  register(p: Permission): void {
    if (p === null || typeof p !== "object") throw new MnemeError("INVALID_PERMISSION", "a permission must be an object");
    for (const field of ["domain", "type", "description"] as const) {
      const v = (p as unknown as Record<string, unknown>)[field];
      if (typeof v !== "string" || v.trim() === "") {
        throw new MnemeError("INVALID_PERMISSION", `permission ${field} must be a non-empty string (got ${JSON.stringify(v)})`);
      }
    }
    if (typeof p.funcSet !== "boolean") throw new MnemeError("INVALID_PERMISSION", `permission ${p.domain}.${p.type}: funcSet must be a boolean`);
    if (p.funcSet && typeof p.cmdFunc !== "function") {
      throw new MnemeError("INVALID_PERMISSION", `permission ${p.domain}.${p.type} has funcSet but no cmdFunc`);
    }
    if (p.cmdFunc !== undefined && typeof p.cmdFunc !== "function") {
      throw new MnemeError("INVALID_PERMISSION", `permission ${p.domain}.${p.type}: cmdFunc must be a function`);
    }
    const level = p.cmdFunc === undefined ? undefined : permissionLevelOf(p.cmdFunc);
    if (!p.funcSet && p.cmdFunc !== undefined && level === undefined) {
      throw new MnemeError("INVALID_PERMISSION", `permission ${p.domain}.${p.type}: a custom cmdFunc needs funcSet: true (use newPermission or newPermissionCmdFunc)`);
    }
    if (p.cmdFunc === undefined && p.level !== undefined) {
      // A level without its function would silently fall back to "authorizer only": say so instead.
      throw new MnemeError("INVALID_PERMISSION", `permission ${p.domain}.${p.type}: level ${String(p.level)} needs its cmdFunc (use newPermission)`);
    }
    let types = this.#byDomain.get(p.domain);
    if (types === undefined) {
      types = new Map();
      this.#byDomain.set(p.domain, types);
    }
    if (types.has(p.type)) throw new MnemeError("INVALID_PERMISSION", `permission ${p.domain}.${p.type} is registered already`);
    types.set(p.type, Object.freeze(level === undefined ? { ...p } : { ...p, funcSet: false, level }));
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
   * Order: a custom function decides alone; else the level; for `Authorized`
   * then the authorizer. No permission, or one with neither, is denied.
   */
  check(reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope): Promise<void> {
    // Not an async function: a synchronous allow costs no extra promise (this runs before every command and query).
    let outcome: Outcome;
    try {
      outcome = this.evaluate(reqCtx, envelope);
    } catch (e) {
      return Promise.reject(e);
    }
    if (outcome === undefined) return ALLOWED;
    if (outcome instanceof Promise) return outcome.then(rejectDenial);
    return Promise.reject(outcome);
  }

  /**
   * The check without the promise where every step is synchronous: returns
   * undefined (allow), a MnemeError (deny), or a promise of either.
   */
  evaluate(reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope): MnemeError | undefined | Promise<MnemeError | undefined> {
    const p = this.#byDomain.get(envelope.domain)?.get(envelope.name);
    if (p === undefined) return new MnemeError("PERMISSION_DENIED", `no permission is registered for ${envelope.domain}.${envelope.name}`);
    const fn = p.cmdFunc;
    if (fn !== undefined) {
      // A custom function decides alone; a level is followed by the authorizer for Authorized.
      const then = !p.funcSet && p.level === "Authorized" ? this.#authorizer : undefined;
      let r: unknown;
      try {
        r = fn(reqCtx, envelope, this.#context);
      } catch (e) {
        return toDenial(p, e);
      }
      return isThenable(r)
        ? Promise.resolve(r).then((v) => verdict(p, v, reqCtx, envelope, then), (e: unknown) => toDenial(p, e))
        : verdict(p, r, reqCtx, envelope, then);
    }
    // No level and no custom function (store permissions): only the authorizer grants.
    if (this.#authorizer === undefined) {
      return new MnemeError("PERMISSION_DENIED", `${p.domain}.${p.type} is granted only by an authorizer, and none is installed`);
    }
    return consult(p, this.#authorizer, reqCtx, envelope);
  }
}

type Outcome = MnemeError | undefined | Promise<MnemeError | undefined>;

const ALLOWED: Promise<void> = Promise.resolve();

function rejectDenial(denied: MnemeError | undefined): void {
  if (denied !== undefined) throw denied;
}

/** Nothing allows (then the authorizer, if any); an Error denies; anything else denies too (deny is the default). */
function verdict(p: Permission, r: unknown, reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope, then: Authorizer | undefined): Outcome {
  if (r === undefined) return then === undefined ? undefined : consult(p, then, reqCtx, envelope);
  if (r instanceof Error) return toDenial(p, r);
  // e.g. `(ctx) => ctx.senderAccountUuid === admin`: a boolean type-checks as void, and must not allow.
  return new MnemeError("PERMISSION_DENIED", `permission denied for ${p.domain}.${p.type}: its permission function returned ${describe(r)}; return nothing to allow or an Error to deny`);
}

function consult(p: Permission, authorizer: Authorizer, reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope): Outcome {
  let r: unknown;
  try {
    r = authorizer(reqCtx, p, envelope);
  } catch (e) {
    return toDenial(p, e);
  }
  return isThenable(r)
    ? Promise.resolve(r).then((v) => verdict(p, v, reqCtx, envelope, undefined) as MnemeError | undefined, (e: unknown) => toDenial(p, e))
    : verdict(p, r, reqCtx, envelope, undefined);
}

function isThenable(r: unknown): r is PromiseLike<unknown> {
  return r instanceof Promise || (typeof r === "object" && r !== null && typeof (r as { then?: unknown }).then === "function");
}

function describe(v: unknown): string {
  if (v === null) return "null";
  return typeof v === "object" ? "an object" : `${typeof v} ${String(v)}`;
}

function toDenial(p: Permission, e: unknown): MnemeError {
  if (isMnemeError(e)) return e;
  const reason = e instanceof Error ? e.message : String(e);
  return new MnemeError("PERMISSION_DENIED", `permission denied for ${p.domain}.${p.type}: ${reason}`, { cause: e });
}
