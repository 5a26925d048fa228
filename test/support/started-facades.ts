/** Facades a test file starts and stops again after each test. */
import { afterEach } from "vitest";
import { createFacade, type Facade } from "mneme";

/**
 * Registers an afterEach that stops every facade started since, and returns
 * `started(setup, opts)`: a facade created with `opts`, set up (domains, readmodels) and started.
 */
export function startedFacades(): (setup: (f: Facade) => void, opts?: Parameters<typeof createFacade>[0]) => Promise<Facade> {
  const facades: Facade[] = [];
  afterEach(async () => {
    for (const f of facades.splice(0)) await f.stop();
  });
  return async (setup, opts = {}) => {
    const f = createFacade(opts);
    facades.push(f);
    setup(f);
    await f.start();
    return f;
  };
}
