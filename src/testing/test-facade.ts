import type { Domain } from "../model/domain.js";
import { createFacade, type Facade, type FacadeOptions } from "../app/facade.js";
import type { EventHandler } from "../model/event-handler.js";

/** The system administrator's request context shape used by tests (all four sender fields). */
export const testReqCtx = Object.freeze({
  senderAccountUuid: "00000000-0000-7000-8000-0000000000a1",
  senderSessionUuid: "00000000-0000-7000-8000-0000000000b1",
  senderIdentityUuid: "00000000-0000-7000-8000-0000000000c1",
  senderTenantUuid: "00000000-0000-7000-8000-0000000000d1",
});

export interface TestFacadeOptions extends FacadeOptions {
  readonly domains?: readonly Domain[];
  /** Readmodels to register, built from the facade. */
  readonly readmodels?: (facade: Facade) => readonly EventHandler[];
}

/**
 * A started facade on in-memory stores (unless given others), with domains and
 * readmodels registered. Stop it when done.
 * @example
 * const facade = await createTestFacade({ domains: [Todo], readmodels: (f) => [new TodoProjection(f)] });
 */
export async function createTestFacade(opts: TestFacadeOptions = {}): Promise<Facade> {
  const { domains = [], readmodels, ...facadeOptions } = opts;
  const facade = createFacade({ appName: "mneme-test", ...facadeOptions });
  for (const d of domains) facade.registerDomain(d);
  for (const r of readmodels?.(facade) ?? []) facade.registerReadmodel(r);
  await facade.start();
  return facade;
}
