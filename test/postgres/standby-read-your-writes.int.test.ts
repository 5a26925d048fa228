/**
 * Read your writes on every instance: `waitToFinish` on an instance whose
 * readmodel is in standby (another instance holds its lock) waits until the
 * holder's checkpoint, shared through the readmodel's backend, passes the
 * command's events; a query on that instance then sees the write. At the
 * wait's bound, `handlerErrors` says how far the holder got. Two facades on
 * one SQLite file and on one Postgres schema.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createFacade, newUuid, type Facade, type FacadeOptions, type RequestContext } from "mneme";
import { CreateTodo, GetTodo, registerTodo, RenameTodo } from "../../examples/todo/todo-domain.js";
import { sharedPlaces } from "../support/shared-places.js";
import { until } from "../support/until.js";

const reqCtx: RequestContext = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t" };
const facades: Facade[] = [];
// Stopped after each test: the facades of one file share a Postgres pool.
afterEach(async () => {
  for (const f of facades.splice(0).reverse()) await f.stop().catch(() => undefined);
});

// Memory has no processing lock (one instance per process): no standby there.
const places = sharedPlaces("standby_ryw").filter(([name]) => name !== "memory");

describe.each(places)("read your writes on a standby instance (%s)", (_name, place) => {
  async function instance(stores: () => Partial<FacadeOptions>, delivery: FacadeOptions["delivery"] = {}) {
    const f = createFacade({ appName: "standby-ryw", ...stores(), delivery: { lockRetryMs: 3_600_000, ...delivery } });
    facades.push(f);
    registerTodo(f);
    await f.start();
    return { f, state: () => f.runtime.listEventHandlers().find((h) => h.eventHandlerName === "TodoProjection")!.state };
  }

  it("a command dispatched with waitToFinish on the standby is in its next query, every time, from either instance", async () => {
    const stores = place();
    const holder = await instance(stores);
    const standby = await instance(stores);
    expect(holder.state()).toBe("running");
    expect(standby.state()).toBe("standby");
    for (let i = 0; i < 12; i++) {
      const via = i % 3 === 0 ? holder : standby;
      const todoUuid = newUuid();
      const r = await via.f.dispatch(CreateTodo, { todoUuid, title: `t${i}` }, { reqCtx, waitToFinish: true });
      expect(r.handlerErrors).toEqual([]);
      expect((await standby.f.query(GetTodo, { todoUuid }, { reqCtx }))?.model.title).toBe(`t${i}`);
      const renamed = await standby.f.dispatch(RenameTodo, { todoUuid, title: `r${i}` }, { reqCtx, waitToFinish: true });
      expect(renamed.handlerErrors).toEqual([]);
      expect((await standby.f.query(GetTodo, { todoUuid }, { reqCtx }))?.model.title).toBe(`r${i}`);
    }
    expect(standby.state()).toBe("standby");
  }, 60_000);

  it("concurrent commands waiting on the standby each see their own write", async () => {
    const stores = place();
    const holder = await instance(stores);
    const standby = await instance(stores);
    expect(holder.state()).toBe("running");
    const uuids = Array.from({ length: 16 }, () => newUuid());
    const results = await Promise.all(
      uuids.map(async (todoUuid, i) => {
        const r = await standby.f.dispatch(CreateTodo, { todoUuid, title: `c${i}` }, { reqCtx, waitToFinish: true });
        return { errors: r.handlerErrors, title: (await standby.f.query(GetTodo, { todoUuid }, { reqCtx }))?.model.title };
      }),
    );
    expect(results).toEqual(uuids.map((_, i) => ({ errors: [], title: `c${i}` })));
  }, 60_000);

  it("with the holder stopped (and no take-over), the wait ends at standbyWaitMs and handlerErrors says where the holder's checkpoint is", async () => {
    const stores = place();
    const holder = await instance(stores);
    const standby = await instance(stores, { standbyWaitMs: 300 });
    const first = newUuid();
    await standby.f.dispatch(CreateTodo, { todoUuid: first, title: "applied" }, { reqCtx, waitToFinish: true });
    await holder.f.stop();
    // The holder let the lock go, but this standby does not retry for an hour: nobody applies the next command.
    const todoUuid = newUuid();
    const t0 = performance.now();
    const r = await standby.f.dispatch(CreateTodo, { todoUuid, title: "not applied" }, { reqCtx, waitToFinish: true });
    const waited = performance.now() - t0;
    const position = r.events[0]!.position;
    expect(r.handlerErrors).toHaveLength(1);
    expect(r.handlerErrors[0]!.eventHandlerName).toBe("TodoProjection");
    expect(r.handlerErrors[0]!.error).toMatchObject({
      code: "INVALID_STATE",
      details: [{ message: "standby", state: "standby", eventHandlerName: "TodoProjection", checkpoint: position - 1, position }],
    });
    expect(r.handlerErrors[0]!.error.message).toMatch(
      new RegExp(`checkpoint is at position ${position - 1}, short of position ${position}`),
    );
    expect(waited).toBeGreaterThanOrEqual(290);
    // It says so honestly: the query here does not show the write.
    expect(await standby.f.query(GetTodo, { todoUuid }, { reqCtx })).toBeUndefined();
    expect((await standby.f.query(GetTodo, { todoUuid: first }, { reqCtx }))?.model.title).toBe("applied");
  }, 60_000);

  it("when the standby takes the readmodel over during the wait, its own delivery answers it", async () => {
    const stores = place();
    const holder = await instance(stores);
    const standby = await instance(stores, { lockRetryMs: 50, standbyWaitMs: 30_000 });
    await holder.f.stop();
    const todoUuid = newUuid();
    const r = await standby.f.dispatch(CreateTodo, { todoUuid, title: "after take-over" }, { reqCtx, waitToFinish: true });
    expect(r.handlerErrors).toEqual([]);
    expect((await standby.f.query(GetTodo, { todoUuid }, { reqCtx }))?.model.title).toBe("after take-over");
    await until(() => standby.state() === "running", "the standby took over");
  }, 60_000);
});
