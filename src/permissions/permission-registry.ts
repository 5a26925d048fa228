import { isMnemeError, MnemeError } from "../core/errors.js";
import type { CommandEnvelope, QueryEnvelope, RequestContext } from "../core/types.js";
import type { Permission } from "./permission.js";

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

  constructor(authorizer?: Authorizer) {
    this.#authorizer = authorizer;
  }

  /** Installs (or replaces) the authorizer, e.g. from registerDefaults. */
  setAuthorizer(authorizer: Authorizer | undefined): void {
    this.#authorizer = authorizer;
  }

  get authorizer(): Authorizer | undefined {
    return this.#authorizer;
  }

  /** Validates and adds a permission. INVALID_PERMISSION on empty fields or a duplicate (domain, type). */
  register(p: Permission): void {
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
    let types = this.#byDomain.get(p.domain);
    if (types === undefined) {
      types = new Map();
      this.#byDomain.set(p.domain, types);
    }
    if (types.has(p.type)) throw new MnemeError("INVALID_PERMISSION", `permission ${p.domain}.${p.type} is registered already`);
    types.set(p.type, Object.freeze({ ...p }));
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
  async check(reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope): Promise<void> {
    const denied = await this.evaluate(reqCtx, envelope);
    if (denied !== undefined) throw denied;
  }

  /**
   * The check without the promise where every step is synchronous: returns
   * undefined (allow), a MnemeError (deny), or a promise of either.
   */
  evaluate(reqCtx: RequestContext, envelope: CommandEnvelope | QueryEnvelope): MnemeError | undefined | Promise<MnemeError | undefined> {
    const p = this.#byDomain.get(envelope.domain)?.get(envelope.name);
    if (p === undefined) return new MnemeError("PERMISSION_DENIED", `no permission is registered for ${envelope.domain}.${envelope.name}`);
    if (p.funcSet) return settle(p, p.cmdFunc, reqCtx, envelope, undefined);
    if (p.level !== undefined && p.cmdFunc !== undefined) {
      if (p.level !== "Authorized" || this.#authorizer === undefined) return settle(p, p.cmdFunc, reqCtx, envelope, undefined);
      return settle(p, p.cmdFunc, reqCtx, envelope, this.#authorizer);
    }
    // No level and no custom function (store permissions): only the authorizer grants.
    if (this.#authorizer === undefined) {
      return new MnemeError("PERMISSION_DENIED", `${p.domain}.${p.type} is granted only by an authorizer, and none is installed`);
    }
    return settle(p, this.#authorizer.bind(null) as unknown as Permission["cmdFunc"], reqCtx, envelope, undefined, true);
  }
}

type Outcome = MnemeError | undefined | Promise<MnemeError | undefined>;

function settle(
  p: Permission,
  fn: Permission["cmdFunc"],
  reqCtx: RequestContext,
  envelope: CommandEnvelope | QueryEnvelope,
  then: Authorizer | undefined,
  isAuthorizer = false,
): Outcome {
  let r: unknown;
  try {
    r = isAuthorizer ? (fn as unknown as Authorizer)(reqCtx, p, envelope) : fn!(reqCtx, envelope);
  } catch (e) {
    return toDenial(p, e);
  }
  if (r instanceof Promise) {
    return r.then(
      (v: unknown) => (v instanceof Error ? toDenial(p, v) : then === undefined ? undefined : settle(p, then as never, reqCtx, envelope, undefined, true)),
      (e: unknown) => toDenial(p, e),
    );
  }
  if (r instanceof Error) return toDenial(p, r);
  return then === undefined ? undefined : settle(p, then as never, reqCtx, envelope, undefined, true);
}

function toDenial(p: Permission, e: unknown): MnemeError {
  if (isMnemeError(e)) return e;
  const reason = e instanceof Error ? e.message : String(e);
  return new MnemeError("PERMISSION_DENIED", `permission denied for ${p.domain}.${p.type}: ${reason}`, { cause: e });
}
