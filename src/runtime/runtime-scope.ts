/**
 * Which tenants a Runtime read covers. Through the Runtime domain (dispatch,
 * query, HTTP) a read is scoped to the caller's effective tenant; the payload's
 * `allTenants: true` widens it to every tenant when the authorizer grants the
 * message as an administrator permission (system administrators). Direct calls
 * on the Runtime are trusted code: unscoped unless given a scope.
 */
import { MnemeError } from "../model/errors.js";
import type { EventHandlerInfo, EventHandlerMetrics } from "../model/event-handler.js";
import type { QueryEnvelope, RequestContext } from "../model/types.js";
import type { PermissionRegistry } from "../permissions/permission-registry.js";

/** One tenant's view (`tenantUuid`), or every tenant's (`tenantUuid` absent). */
export interface RuntimeScope {
  readonly tenantUuid?: string;
}

/** Every tenant: what a direct call on the Runtime sees. */
export const ALL_TENANTS: RuntimeScope = Object.freeze({});

/** What a scoped Runtime request may carry. */
export interface TenantSelection {
  /** Every tenant's entries (system administrators). */
  allTenants?: boolean;
  /** Only this tenant's entries: the caller's own, or any with `allTenants`. */
  tenantUuid?: string;
}

/**
 * The scope of a Runtime request made in `tenantUuid` (the effective tenant).
 * PERMISSION_DENIED for another tenant than the caller's, or for
 * `allTenants` unless the authorizer grants the envelope as an administrator
 * permission.
 */
export async function scopeOfRequest(
  permissions: PermissionRegistry,
  reqCtx: RequestContext,
  envelope: QueryEnvelope,
  tenantUuid: string,
  selection: TenantSelection,
): Promise<RuntimeScope> {
  if (selection.allTenants !== undefined && typeof selection.allTenants !== "boolean")
    throw new MnemeError("INVALID_REQUEST", "allTenants must be a boolean");
  if (selection.allTenants === true) {
    await permissions.checkAdministrator(reqCtx, envelope);
    return selection.tenantUuid === undefined ? ALL_TENANTS : { tenantUuid: selection.tenantUuid };
  }
  if (selection.tenantUuid !== undefined && selection.tenantUuid !== tenantUuid) {
    throw new MnemeError(
      "PERMISSION_DENIED",
      `${envelope.domain}.${envelope.name}: the request works in tenant ${JSON.stringify(tenantUuid)}; another tenant's entries need allTenants (system administrators)`,
    );
  }
  return { tenantUuid };
}

/** Whether an error of `errorTenantUuid` (undefined: of no event) may be shown in `scope`. */
function errorVisible(scope: RuntimeScope, errorTenantUuid: string | undefined): boolean {
  return scope.tenantUuid === undefined || errorTenantUuid === undefined || errorTenantUuid === scope.tenantUuid;
}

/**
 * A handler's listing as `scope` may see it: an error of another tenant's event is left out, the handler's own
 * and its broker link's (a consumer's message, a publisher's event).
 */
export function scopedInfo<I extends EventHandlerInfo>(info: I, scope: RuntimeScope): I {
  let out = info;
  if (out.lastError !== undefined && !errorVisible(scope, out.lastErrorTenantUuid)) {
    const { lastError: _e, lastErrorTenantUuid: _t, ...rest } = out;
    out = rest as I;
  }
  const link = out.integration;
  if (link?.lastError !== undefined && !errorVisible(scope, link.lastErrorTenantUuid)) {
    const { lastError: _e, lastErrorTenantUuid: _t, ...rest } = link;
    out = { ...out, integration: rest };
  }
  return out;
}

/** A handler's metrics as `scope` may see them: an error of another tenant's event is left out. */
export function scopedMetrics(metrics: EventHandlerMetrics, scope: RuntimeScope): EventHandlerMetrics {
  if (metrics.lastError === undefined || errorVisible(scope, metrics.lastErrorTenantUuid)) return metrics;
  const { lastError: _e, lastErrorTenantUuid: _t, ...rest } = metrics;
  return rest;
}
