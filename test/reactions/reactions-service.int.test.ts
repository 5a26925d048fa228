/**
 * Service principals of reactions: a process manager with `service` sends
 * its commands as that service (not as the user whose event it reacts to,
 * not as an administrator), with the built-in domains' authorizer in place.
 * A command of its grant succeeds and is audited as the service; a command
 * outside it is PERMISSION_DENIED (dead at once); it cannot reach another
 * tenant's aggregate; a request context naming a service cannot widen
 * anything else. On memory, SQLite and Postgres.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createFacade, type Facade, newUuid } from "mneme";
import { registerDefaults } from "mneme/defaults";
import { ProcessManager, Reactor, servicePrincipal } from "mneme/reactions";
import { installOrders } from "../../examples/orders/fulfilment.js";
import { PlaceOrderCmd } from "../../examples/orders/orders-domain.js";
import { restock } from "../../examples/orders/restock.js";
import { CompleteTodo, CreateTodo, GetTodo, registerTodo, RenameTodo, TodoCreated } from "../../examples/todo/todo-domain.js";
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_HASHING, FakeClock, World } from "../support/defaults-world.js";
import { sharedPlaces } from "../support/shared-places.js";

const facades: Facade[] = [];
afterEach(async () => {
  for (const f of facades.splice(0).reverse()) await f.stop().catch(() => undefined);
});

const reviewer = servicePrincipal({ name: "todo.reviewer", commands: [RenameTodo] });

/** Reacts to a new todo by its title: "rename" renames it, "complete" completes it, "other:<uuid>" renames that todo. */
function reviewerOf(facade: Facade): ProcessManager<Record<string, never>> {
  return new ProcessManager<Record<string, never>>(facade, {
    name: "Reviewer",
    domain: "Todo",
    service: reviewer,
    retry: { maxAttempts: 1 },
    initialState: () => ({}),
    correlate: (e) => e.aggregateUuid,
  }).on(TodoCreated, (ctx, s, p, e) => {
    if (p.title === "rename") ctx.dispatch(RenameTodo, { todoUuid: e.aggregateUuid, title: "renamed by the reviewer" });
    if (p.title === "complete") ctx.dispatch(CompleteTodo, { todoUuid: e.aggregateUuid });
    if (p.title.startsWith("other:")) ctx.dispatch(RenameTodo, { todoUuid: p.title.slice(6), title: "taken over" });
    return s;
  });
}

describe.each(sharedPlaces("reaction_service"))("a process manager's service principal (%s)", (_name, place) => {
  async function start() {
    const facade = createFacade({ appName: "service-test", ...place()() });
    facades.push(facade);
    const clock = new FakeClock();
    const ids = await registerDefaults(facade, {
      admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD },
      passwordHashing: FAST_HASHING,
      clock: clock.fn,
    });
    registerTodo(facade);
    const pm = reviewerOf(facade);
    facade.registerReadmodel(pm);
    await facade.start();
    const admin = await new World(facade, ids, clock, {}).login(ADMIN_EMAIL, ADMIN_PASSWORD, ids.adminIdentityUuid);
    const world = new World(facade, ids, clock, admin.reqCtx);
    const [north, south] = [await world.createTenant("north"), await world.createTenant("south")];
    const ann = await world.member("ann@example.org", north, ["Todo.*"]);
    const bob = await world.member("bob@example.org", south, ["Todo.CreateTodo", "Todo.GetTodo"]);
    const settle = async () => {
      const head = await facade.eventRepository.headPosition();
      while (pm.lastPosition < head) await new Promise((r) => setTimeout(r, 5));
      await pm.outbox.drain();
    };
    return { facade, pm, ann, bob, settle };
  }

  it("sends a command of its grant as the service, in the event's tenant, even where the user may not", async () => {
    const { facade, pm, bob, settle } = await start();
    const todoUuid = newUuid();
    // Bob may create but not rename: the rename is the service's, not his.
    await expect(facade.dispatch(RenameTodo, { todoUuid, title: "x" }, { reqCtx: bob.reqCtx })).rejects.toMatchObject({
      code: "PERMISSION_DENIED",
    });
    await facade.dispatch(CreateTodo, { todoUuid, title: "rename" }, { reqCtx: bob.reqCtx });
    await settle();
    expect((await facade.query(GetTodo, { todoUuid }, { reqCtx: bob.reqCtx }))?.model.title).toBe("renamed by the reviewer");
    const renamed = (await facade.eventRepository.loadAggregate(todoUuid)).find((e) => e.name === "TodoRenamed")!;
    // Audited as the service in Bob's tenant: no account, identity or session, and not an administrator.
    expect(renamed.reqCtx).toMatchObject({ senderService: "todo.reviewer", senderTenantUuid: bob.reqCtx.senderTenantUuid });
    expect(renamed.reqCtx.senderAccountUuid).toBeUndefined();
    expect(renamed.reqCtx.senderIdentityUuid).toBeUndefined();
    expect(renamed.tenantUuid).toBe(bob.reqCtx.senderTenantUuid);
    expect(await pm.outbox.list({ status: "dead" })).toEqual([]);
  });

  it("a command outside its grant is PERMISSION_DENIED and dead at once; nothing is appended", async () => {
    const { facade, pm, ann, settle } = await start();
    const todoUuid = newUuid();
    // Ann herself may complete todos: the service may not, whoever caused the event.
    await facade.dispatch(CreateTodo, { todoUuid, title: "complete" }, { reqCtx: ann.reqCtx });
    await settle();
    const [dead] = await pm.outbox.list({ status: "dead" });
    expect(dead).toMatchObject({ status: "dead", attempts: 1 });
    expect(dead?.lastError).toBe("service todo.reviewer may send Todo.RenameTodo only, not Todo.CompleteTodo");
    // The command's record: denied, sent by the service.
    const record = await facade.commandStore.get(dead!.id);
    expect(record).toMatchObject({ status: "denied", domain: "Todo", name: "CompleteTodo" });
    expect(JSON.stringify(record)).toContain('"senderService":"todo.reviewer"');
    expect((await facade.eventRepository.loadAggregate(todoUuid)).map((e) => e.name)).toEqual(["TodoCreated"]);
  });

  it("cannot act in another tenant: a todo of another tenant is not found and stays as it was", async () => {
    const { facade, pm, ann, bob, settle } = await start();
    const southTodo = newUuid();
    await facade.dispatch(CreateTodo, { todoUuid: southTodo, title: "bob's" }, { reqCtx: bob.reqCtx });
    await facade.dispatch(CreateTodo, { todoUuid: newUuid(), title: `other:${southTodo}` }, { reqCtx: ann.reqCtx });
    await settle();
    const [dead] = await pm.outbox.list({ status: "dead" });
    expect(dead?.lastError).toContain(`Todo.Todo ${southTodo} was not found`);
    expect((await facade.eventRepository.loadAggregate(southTodo)).map((e) => e.name)).toEqual(["TodoCreated"]);
  });

  it("a request context naming a service gets its grant only: no other tenant, no human sender, no unknown service", async () => {
    const { facade, ann, bob } = await start();
    const todoUuid = newUuid();
    await facade.dispatch(CreateTodo, { todoUuid, title: "t" }, { reqCtx: ann.reqCtx });
    const north = ann.reqCtx.senderTenantUuid!;
    const denied = (reqCtx: object) =>
      expect(facade.dispatch(RenameTodo, { todoUuid, title: "forged" }, { reqCtx })).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
    await denied({ senderService: "todo.reviewer", senderTenantUuid: north, targetTenantUuid: bob.reqCtx.senderTenantUuid });
    await denied({ ...ann.reqCtx, senderService: "todo.reviewer" });
    await denied({ senderService: "someone.else", senderTenantUuid: north });
    await expect(
      facade.query(GetTodo, { todoUuid }, { reqCtx: { senderService: "todo.reviewer", senderTenantUuid: north } }),
    ).rejects.toMatchObject({
      code: "PERMISSION_DENIED",
    });
    const reqCtx = { senderService: "todo.reviewer", senderTenantUuid: north };
    await facade.dispatch(RenameTodo, { todoUuid, title: "by the service" }, { reqCtx, waitToFinish: true });
    expect((await facade.query(GetTodo, { todoUuid }, { reqCtx: ann.reqCtx }))?.model.title).toBe("by the service");
  });

  it("refuses a service that is not a servicePrincipal, one given with reqCtx, and a name reused with other commands", async () => {
    const facade = createFacade({ appName: "service-options" });
    facades.push(facade);
    registerTodo(facade);
    const base = { name: "P", domain: "Todo", initialState: () => ({}) };
    expect(() => new ProcessManager(facade, { ...base, service: { name: "x", commands: ["Todo.RenameTodo"] } as never })).toThrow(
      expect.objectContaining({ code: "INVALID_EVENT_HANDLER" }),
    );
    expect(() => new ProcessManager(facade, { ...base, service: reviewer, reqCtx: () => ({}) })).toThrow(
      expect.objectContaining({ code: "INVALID_EVENT_HANDLER" }),
    );
    new ProcessManager(facade, { ...base, service: reviewer });
    const wider = servicePrincipal({ name: "todo.reviewer", commands: [RenameTodo, CompleteTodo] });
    expect(() => new ProcessManager(facade, { ...base, name: "Q", service: wider })).toThrow(
      expect.objectContaining({ code: "INVALID_PERMISSION" }),
    );
    expect(() => servicePrincipal({ name: "bad name", commands: [RenameTodo] })).toThrow(
      expect.objectContaining({ code: "INVALID_REQUEST" }),
    );
    expect(() => servicePrincipal({ name: "n", commands: [] })).toThrow(expect.objectContaining({ code: "INVALID_REQUEST" }));
    expect(() => servicePrincipal({ name: "n", commands: [TodoCreated as never] })).toThrow(
      expect.objectContaining({ code: "INVALID_REQUEST" }),
    );
  });
});

describe("service principals in the orders example and in a reactor (memory)", () => {
  it("the Restock process manager orders missing stock in as orders.restock, not as the buyer", async () => {
    const facade = createFacade({ appName: "restock" });
    facades.push(facade);
    const { fulfilment } = installOrders(facade, { provider: { charge: async () => ({ chargeId: "c" }) }, paymentTimeoutMs: 60_000 });
    const pm = restock(facade);
    facade.registerReadmodel(pm);
    await facade.start();
    const buyer = { senderAccountUuid: "buyer", senderTenantUuid: "shop-1" };
    await facade.dispatch(PlaceOrderCmd, { orderUuid: newUuid(), sku: "lamp", quantity: 3, amount: 30 }, { reqCtx: buyer });
    for (let i = 0; i < 400 && (await facade.eventRepository.loadAggregate("lamp")).length < 2; i++) {
      await fulfilment.outbox.drain();
      await pm.outbox.drain();
      await new Promise((r) => setTimeout(r, 5));
    }
    const [unavailable, added] = await facade.eventRepository.loadAggregate("lamp");
    expect(unavailable?.name).toBe("StockUnavailable");
    expect(added).toMatchObject({ name: "StockAdded", tenantUuid: "shop-1", payload: { sku: "lamp", quantity: 3 } });
    expect(added?.reqCtx).toMatchObject({ senderService: "orders.restock", senderTenantUuid: "shop-1", targetTenantUuid: "shop-1" });
    expect(added?.reqCtx.senderAccountUuid).toBeUndefined();
  });

  it("a reactor's effect dispatches with info.reqCtx as its service: its grant only", async () => {
    const facade = createFacade({ appName: "reactor-service" });
    facades.push(facade);
    registerTodo(facade);
    const outcomes: string[] = [];
    const reactor = new Reactor(facade, { name: "Titler", domain: "Todo", service: reviewer, retry: { maxAttempts: 1 } }).on(
      TodoCreated,
      async (e, info) => {
        expect(info.reqCtx).toMatchObject({ senderService: "todo.reviewer", senderTenantUuid: "t1", causationId: e.eventUuid });
        await facade.dispatch(RenameTodo, { todoUuid: e.aggregateUuid, title: "titled" }, { reqCtx: info.reqCtx! });
        outcomes.push("renamed");
        await facade.dispatch(CompleteTodo, { todoUuid: e.aggregateUuid }, { reqCtx: info.reqCtx! }).catch((err: { code: string }) => {
          outcomes.push(err.code);
        });
      },
    );
    facade.registerReadmodel(reactor);
    await facade.start();
    const todoUuid = newUuid();
    await facade.dispatch(
      CreateTodo,
      { todoUuid, title: "t" },
      { reqCtx: { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t1" } },
    );
    for (let i = 0; i < 400 && outcomes.length < 2; i++) {
      await reactor.outbox.drain();
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(outcomes).toEqual(["renamed", "PERMISSION_DENIED"]);
    expect((await facade.eventRepository.loadAggregate(todoUuid)).map((e) => e.name)).toEqual(["TodoCreated", "TodoRenamed"]);
  });
});
