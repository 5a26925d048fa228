import { MnemeError } from "../model/errors.js";
import { isServicePrincipal, type ServicePrincipal } from "../model/service-principal.js";

/** What registering a service needs of the facade: its permission registry (the Facade has one). */
interface ServiceRegistrar {
  readonly permissions?: { registerService?(service: ServicePrincipal): void };
}

/**
 * Registers the `service` option of a process manager or reactor with the
 * facade's permissions, so request contexts naming it get its commands;
 * undefined when none is given.
 */
export function registerReactionService(facade: object, handlerName: string, service: unknown): ServicePrincipal | undefined {
  if (service === undefined) return undefined;
  if (!isServicePrincipal(service))
    throw new MnemeError("INVALID_EVENT_HANDLER", `${handlerName}: service must be made by servicePrincipal({ name, commands })`);
  const registry = (facade as ServiceRegistrar).permissions;
  if (typeof registry?.registerService !== "function")
    throw new MnemeError("INVALID_EVENT_HANDLER", `${handlerName}: a service needs a facade whose permissions register services`);
  registry.registerService(service);
  return service;
}
