import type { RequestContext } from "./types.js";

/** The effective tenant of a request: the target tenant, else the sender's, else "" (none). */
export function tenantOf(reqCtx: RequestContext): string {
  return reqCtx.targetTenantUuid ?? reqCtx.senderTenantUuid ?? "";
}
