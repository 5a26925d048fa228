/**
 * Service principals: the non-human senders of process managers and
 * reactors, each with the fixed list of commands it may send (least
 * privilege). A request context names its service (`senderService`); the
 * permission registry grants exactly that list, in the tenant the context is
 * scoped to, and nothing else: no authorizer, no group, no administrator.
 */
import { MnemeError } from "./errors.js";
import type { CommandRef } from "./facade-handle.js";
import type { RequestContext } from "./types.js";

/** A non-human sender and the commands it may send (`Domain.Name` each). */
export interface ServicePrincipal {
  readonly kind: "service";
  readonly name: string;
  readonly commands: readonly string[];
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * A service principal for a process manager or a reactor (their `service`
 * option): the commands it may send, each by its command type. Its commands
 * run as `{ senderService: name }` in the tenant of the event they react to;
 * any other command is PERMISSION_DENIED.
 * @example
 * const escalations = servicePrincipal({ name: "helpdesk.escalations", commands: [EscalateTicket] });
 * new ProcessManager(facade, { name: "Escalations", domain: "Helpdesk", service: escalations, initialState: () => ({}) });
 */
export function servicePrincipal(opts: { readonly name: string; readonly commands: readonly CommandRef[] }): ServicePrincipal {
  if (typeof opts !== "object" || opts === null) throw new MnemeError("INVALID_REQUEST", "servicePrincipal: options are required");
  const { name, commands } = opts;
  if (typeof name !== "string" || !NAME.test(name))
    throw new MnemeError("INVALID_REQUEST", "servicePrincipal: name must be 1..128 characters of letters, digits, '.', '_', ':' or '-'");
  if (!Array.isArray(commands) || commands.length === 0)
    throw new MnemeError("INVALID_REQUEST", `servicePrincipal ${name}: commands must list at least one command type`);
  const paths = new Set<string>();
  for (const c of commands as readonly unknown[]) {
    const t = c as { kind?: unknown; domain?: unknown; name?: unknown } | undefined;
    if (typeof t?.domain !== "string" || typeof t.name !== "string" || t.domain === "" || t.name === "" || t.kind !== "command")
      throw new MnemeError("INVALID_REQUEST", `servicePrincipal ${name}: commands must be command types (D.command(...))`);
    paths.add(`${t.domain}.${t.name}`);
  }
  return Object.freeze({ kind: "service", name, commands: Object.freeze([...paths].sort()) });
}

/** True for a value made by {@link servicePrincipal}. */
export function isServicePrincipal(v: unknown): v is ServicePrincipal {
  const p = v as Partial<ServicePrincipal> | undefined;
  return p?.kind === "service" && typeof p.name === "string" && Array.isArray(p.commands);
}

/**
 * The request context a service sends with for an event of `tenantUuid`:
 * the service as sender, scoped to that tenant ("" for an event without one:
 * then only global aggregates are within its reach).
 */
export function serviceRequestContext(service: ServicePrincipal, tenantUuid: string): RequestContext {
  return tenantUuid === ""
    ? { senderService: service.name }
    : { senderService: service.name, senderTenantUuid: tenantUuid, targetTenantUuid: tenantUuid };
}

/**
 * The verdict on a request context that names a service: undefined (allowed)
 * only for a registered service, without human sender fields, within its own
 * tenant, sending a command of its list.
 */
export function serviceVerdict(
  services: ReadonlyMap<string, ServicePrincipal>,
  reqCtx: RequestContext,
  message: { readonly domain: string; readonly name: string },
): MnemeError | undefined {
  const deny = (why: string) => new MnemeError("PERMISSION_DENIED", why);
  const name = reqCtx.senderService;
  const service = typeof name === "string" ? services.get(name) : undefined;
  if (service === undefined)
    return deny(`unknown service ${JSON.stringify(name)}: only the service of a registered process manager or reactor sends as one`);
  if (reqCtx.senderAccountUuid !== undefined || reqCtx.senderIdentityUuid !== undefined || reqCtx.senderSessionUuid !== undefined)
    return deny(`service ${service.name}: a service's request carries no account, identity or session`);
  if (reqCtx.targetTenantUuid !== undefined && reqCtx.targetTenantUuid !== reqCtx.senderTenantUuid)
    return deny(`service ${service.name} acts only in the tenant of the event it reacts to`);
  const path = `${message.domain}.${message.name}`;
  if (!service.commands.includes(path)) return deny(`service ${service.name} may send ${service.commands.join(", ")} only, not ${path}`);
  return undefined;
}
