/**
 * Erasure on a sharded app: each shard keeps its own key store, so a subject
 * is forgotten on every shard. `Runtime.ForgetSubject` dispatched on the app
 * asks its permission over every shard's events (a tenant's administrator
 * erases a subject whose events are all in its tenant, wherever the other
 * tenants live), runs on one shard (its record and SubjectForgotten event
 * name the caller), then forgets the subject on the others with the same
 * caller and command.
 */
import type { Facade } from "../app/facade.js";
import { newUuid } from "../model/clock.js";
import { isMnemeError } from "../model/errors.js";
import type { DispatchOptions, DispatchResult } from "../model/facade-handle.js";
import type { CommandEnvelope } from "../model/types.js";
import { ForgetSubject } from "../runtime/runtime-domain.js";

/** What the erasure needs of the sharded app. */
export interface ShardsOfForget {
  readonly home: Facade;
  readonly all: readonly Facade[];
  /** The facade of the shard that holds `tenantUuid`. */
  facadeOfTenant(tenantUuid: string): Promise<Facade>;
}

/** Forgets `subject` on every shard; the keys deleted, summed. */
export async function forgetOnEveryShard(
  shards: readonly Facade[],
  subject: string,
  opts?: Parameters<Facade["forget"]>[1],
): Promise<{ keysDeleted: number }> {
  let keysDeleted = 0;
  for (const f of shards) keysDeleted += (await f.forget(subject, opts)).keysDeleted;
  return { keysDeleted };
}

/** The tenants whose events carry `subject`'s personal data, on every shard. */
async function tenantsOnEveryShard(shards: readonly Facade[], subject: string): Promise<Set<string>> {
  const out = new Set<string>();
  for (const f of shards) for (const t of await f.subjectTenants(subject)) out.add(t);
  return out;
}

/** `Runtime.ForgetSubject` on a sharded app (see the file's comment). */
export async function dispatchForgetSubject(
  shards: ShardsOfForget,
  payload: { subjectUuid: string },
  opts: DispatchOptions,
): Promise<DispatchResult<{ keysDeleted: number }>> {
  const reqCtx = opts.reqCtx ?? {};
  const envelope: CommandEnvelope = {
    commandUuid: opts.commandUuid ?? newUuid(),
    domain: "Runtime",
    name: ForgetSubject.name,
    payload,
    reqCtx,
  };
  let first = shards.home;
  try {
    await shards.home.runtime.permissions.checkAdministrator(reqCtx, envelope);
  } catch (e) {
    if (!isMnemeError(e, "PERMISSION_DENIED")) throw e;
    await shards.home.runtime.authorizeForget(reqCtx, envelope, (s) => tenantsOnEveryShard(shards.all, s));
    // Every event of the subject is in the caller's tenant: its shard's own check sees them all.
    first = await shards.facadeOfTenant((reqCtx.targetTenantUuid ?? reqCtx.senderTenantUuid)!);
  }
  const done = await first.dispatch(ForgetSubject, payload, { ...opts, commandUuid: envelope.commandUuid });
  const others = shards.all.filter((f) => f !== first);
  const rest = await forgetOnEveryShard(others, payload.subjectUuid, { reqCtx, commandUuid: done.commandUuid });
  return { ...done, result: { keysDeleted: (done.result?.keysDeleted ?? 0) + rest.keysDeleted } };
}
