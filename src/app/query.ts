/**
 * The query path: resolve, payload rules, permission check (for callers from
 * outside), schema validation, the handler with its context.
 */
import { newUuid } from "../model/clock.js";
import type { MessageContext, QueryContext } from "../model/context.js";
import { MnemeError } from "../model/errors.js";
import type { FacadeHandle } from "../model/facade-handle.js";
import { isPlainObject } from "../model/redact.js";
import type { QueryType } from "../model/tokens.js";
import type { QueryEnvelope, RequestContext } from "../model/types.js";
import type { PermissionRegistry } from "../permissions/permission-registry.js";
import type { SchemaRegistry } from "../schema/schema-registry.js";
import { QueryAggregates, type TenantLoad } from "./command-context.js";
import type { DomainRegistry } from "./domain-registry.js";
import { checkPayload, notAnObject } from "./request-input.js";
import { tenantOf } from "./tenancy.js";

/** What a query needs of the facade. */
export interface QueryHost {
  readonly facade: FacadeHandle;
  readonly domains: DomainRegistry;
  readonly permissions: PermissionRegistry;
  readonly schemas: SchemaRegistry;
  readonly load: TenantLoad;
  readmodels(tenantUuid: string): MessageContext["readmodel"];
}

/** Runs a query; `check`: the permission check runs (a query from a handler inside the facade skips it). */
export async function runQuery<P, R>(
  host: QueryHost,
  type: QueryType<P, R>,
  payload: P,
  reqCtx: RequestContext,
  queryUuid: string,
  check: boolean,
): Promise<R> {
  const qt = host.domains.resolveQuery(type);
  const domain = host.domains.domains.get(qt.domain)!;
  if (!isPlainObject(payload)) throw notAnObject(qt);
  checkPayload(qt, payload);
  const envelope: QueryEnvelope<P> = { queryUuid, domain: qt.domain, name: qt.name, payload, reqCtx };
  if (check) {
    const verdict = host.permissions.evaluate(reqCtx, envelope);
    const denied = verdict instanceof Promise ? await verdict : verdict;
    if (denied !== undefined) throw denied;
  }
  const validating = host.schemas.validate(qt, payload);
  if (validating !== undefined) await validating;
  const handler = domain.queryHandlers.get(qt.name);
  if (handler === undefined) throw new MnemeError("UNKNOWN_QUERY", `query ${qt.domain}.${qt.name} has no handler`);
  const tenantUuid = tenantOf(reqCtx);
  const ctx: QueryContext = {
    queryUuid,
    reqCtx,
    tenantUuid,
    aggregates: new QueryAggregates(host.load, tenantUuid),
    query: (t, p) => runQuery(host, t, p, reqCtx, newUuid(), false),
    facade: host.facade,
    readmodel: host.readmodels(tenantUuid),
  };
  return (await handler(ctx, envelope, payload)) as R;
}
