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
  /** Registers what the application registers, e.g. `registerTodo` (domains with their install steps, readmodels). */
  readonly register?: (facade: Facade) => void;
  /** Domains to register without an install step (their definitions only). */
  readonly domains?: readonly Domain[];
  /** Readmodels to register, built from the facade. */
  readonly readmodels?: (facade: Facade) => readonly EventHandler[];
}

/**
 * A started facade on in-memory stores (unless given others), with what
 * `register` registers, then `domains` and `readmodels`. Stop it when done.
 * @example
 * const facade = await createTestFacade({ register: registerTodo, readmodels: (f) => [new TodoBoard(f)] });
 */
export async function createTestFacade(opts: TestFacadeOptions = {}): Promise<Facade> {
  const { register, domains = [], readmodels, ...facadeOptions } = opts;
  const facade = createFacade({ appName: "mneme-test", ...facadeOptions });
  register?.(facade);
  for (const d of domains) facade.registerDomain(d);
  for (const r of readmodels?.(facade) ?? []) facade.registerReadmodel(r);
  await facade.start();
  return facade;
}
