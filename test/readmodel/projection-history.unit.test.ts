import { describe, expect, it } from "vitest";
import { createFacade, ProjectionReadmodel, type Facade, type RequestContext } from "mneme";
import {
  CompleteTodo,
  CreateTodo,
  GetTodo,
  ListTodos,
  RenameTodo,
  TodoAggregate,
  registerTodo,
  type TodoState,
} from "../../examples/todo/todo-domain.js";
import { MemoryEventRepository } from "mneme/memory";

/** A repository that counts the calls history makes. */
class SpyRepository extends MemoryEventRepository {
  loadAggregateCalls: string[] = [];
  loadAggregatesCalls: string[][] = [];
  override loadAggregate(uuid: string, opts?: { fromVersion?: number }) {
    this.loadAggregateCalls.push(uuid);
    return super.loadAggregate(uuid, opts);
  }
  override loadAggregates(uuids: readonly string[]) {
    this.loadAggregatesCalls.push([...uuids]);
    return super.loadAggregates(uuids);
  }
  reset() {
    this.loadAggregateCalls = [];
    this.loadAggregatesCalls = [];
  }
}

const tenantA = "0190f5e4-0000-7000-8000-00000000000a";
const tenantB = "0190f5e4-0000-7000-8000-00000000000b";
const ctx = (tenant: string, identity: string): RequestContext => ({
  senderAccountUuid: "acc",
  senderSessionUuid: "ses",
  senderIdentityUuid: identity,
  senderTenantUuid: tenant,
});
const uuid = (n: number) => `0190f5e4-8e4a-7cc4-9f4e-${n.toString(16).padStart(12, "0")}`;

async function setup(): Promise<{ facade: Facade; repo: SpyRepository; projection: ProjectionReadmodel<TodoState> }> {
  const repo = new SpyRepository();
  const facade = createFacade({ eventRepository: repo });
  const projection = registerTodo(facade);
  await facade.start();
  return { facade, repo, projection };
}

describe("ProjectionReadmodel", () => {
  it("keeps one model per aggregate with its tenant, version and times, applying each event once", async () => {
    const { facade, projection } = await setup();
    await facade.dispatch(CreateTodo, { todoUuid: uuid(1), title: "one" }, { reqCtx: ctx(tenantA, "i1"), waitToFinish: true });
    await facade.dispatch(RenameTodo, { todoUuid: uuid(1), title: "uno" }, { reqCtx: ctx(tenantA, "i2"), waitToFinish: true });
    await facade.dispatch(CompleteTodo, { todoUuid: uuid(1) }, { reqCtx: ctx(tenantA, "i3"), waitToFinish: true });
    const m = await projection.getModel(uuid(1));
    expect(m).toMatchObject({ tenantUuid: tenantA, aggregateUuid: uuid(1), model: { exists: true, title: "uno", done: true }, version: 3 });
    expect(m!.updatedAt).toBeGreaterThan(m!.createdAt);
    expect(m).not.toHaveProperty("historyEvents");
    expect(await projection.getModel(uuid(99))).toBeUndefined();
    // the model equals a fold of the aggregate's events
    expect(m!.model).toEqual((await facade.loadAggregate(TodoAggregate, uuid(1))).state);
    await facade.stop();
  });

  it("pages, orders by a whitelisted field, filters by tenant and counts the total", async () => {
    const { facade, projection } = await setup();
    for (let i = 1; i <= 7; i++) {
      await facade.dispatch(
        CreateTodo,
        { todoUuid: uuid(i), title: `t${i}` },
        { reqCtx: ctx(i % 2 ? tenantA : tenantB, "i"), waitToFinish: true },
      );
    }
    await facade.dispatch(RenameTodo, { todoUuid: uuid(2), title: "renamed" }, { reqCtx: ctx(tenantB, "i"), waitToFinish: true });
    const all = await projection.getModelList({ pageSize: 3 });
    expect(all).toMatchObject({ total: 7, page: 1, pageSize: 3 });
    expect(all.items.map((i) => i.aggregateUuid)).toEqual([uuid(1), uuid(2), uuid(3)]);
    const page3 = await projection.getModelList({ pageSize: 3, page: 3 });
    expect(page3.items.map((i) => i.aggregateUuid)).toEqual([uuid(7)]);
    const a = await projection.getModelList({ tenantUuid: tenantA });
    expect(a.total).toBe(4);
    expect(a.items.every((i) => i.tenantUuid === tenantA)).toBe(true);
    const byVersion = await projection.getModelList({ orderBy: "version", descending: true, pageSize: 1 });
    expect(byVersion.items[0]!.aggregateUuid).toBe(uuid(2));
    const byUpdated = await projection.getModelList({ orderBy: "updatedAt", descending: true, pageSize: 1 });
    expect(byUpdated.items[0]!.aggregateUuid).toBe(uuid(2));
    await expect(projection.getModelList({ orderBy: "title" as never })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    await expect(projection.getModelList({ pageSize: 1001 })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    await expect(projection.getModelList({ page: 0 })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    expect((await projection.getModelList({ page: 9 })).items).toEqual([]);
    await facade.stop();
  });

  it("serves toModel(state) and names itself <Aggregate>Projection by default", async () => {
    const facade = createFacade();
    const projection = registerTodo(facade);
    const titles = new ProjectionReadmodel<TodoState, { title: string }>(facade, {
      aggregate: TodoAggregate,
      toModel: (s) => ({ title: s.title.toUpperCase() }),
    });
    expect(titles.name).toBe("TodoProjection");
    expect(titles.domain).toBe("Todo");
    // the same default name as the example's readmodel: a second registration is rejected
    expect(() => facade.registerReadmodel(titles)).toThrow(expect.objectContaining({ code: "INVALID_EVENT_HANDLER" }));
    const renamed = new ProjectionReadmodel<TodoState, { title: string }>(facade, {
      aggregate: TodoAggregate,
      name: "Titles",
      toModel: (s) => ({ title: s.title.toUpperCase() }),
    });
    facade.registerReadmodel(renamed);
    await facade.start();
    await facade.dispatch(CreateTodo, { todoUuid: uuid(1), title: "shout" }, { reqCtx: ctx(tenantA, "i"), waitToFinish: true });
    expect((await renamed.getModel(uuid(1)))!.model).toEqual({ title: "SHOUT" });
    expect((await projection.getModel(uuid(1)))!.model.title).toBe("shout");
    await facade.stop();
  });
});

describe("history on demand", () => {
  it("is absent by default and loaded from the event store at query time only when includeHistory is true", async () => {
    const { facade, repo } = await setup();
    await facade.dispatch(CreateTodo, { todoUuid: uuid(1), title: "a" }, { reqCtx: ctx(tenantA, "id-1"), waitToFinish: true });
    await facade.dispatch(RenameTodo, { todoUuid: uuid(1), title: "b" }, { reqCtx: ctx(tenantA, "id-2"), waitToFinish: true });
    await facade.dispatch(CompleteTodo, { todoUuid: uuid(1) }, { reqCtx: ctx(tenantA, "id-3"), waitToFinish: true });
    repo.reset();
    const plain = await facade.query(GetTodo, { todoUuid: uuid(1) }, { reqCtx: ctx(tenantA, "x") });
    expect(plain).not.toHaveProperty("historyEvents");
    const falseHistory = await facade.query(GetTodo, { todoUuid: uuid(1), includeHistory: false }, { reqCtx: ctx(tenantA, "x") });
    expect(falseHistory).not.toHaveProperty("historyEvents");
    expect(repo.loadAggregateCalls).toEqual([]);

    const withHistory = await facade.query(GetTodo, { todoUuid: uuid(1), includeHistory: true }, { reqCtx: ctx(tenantA, "x") });
    expect(repo.loadAggregateCalls).toEqual([uuid(1)]);
    const h = withHistory!.historyEvents!;
    expect(h.map((e) => e.version)).toEqual([1, 2, 3]);
    expect(h.map((e) => e.domainEvtName)).toEqual(["TodoCreated", "TodoRenamed", "TodoCompleted"]);
    expect(h.map((e) => e.senderIdentityUuid)).toEqual(["id-1", "id-2", "id-3"]);
    expect(h.every((e) => e.senderTenantUuid === tenantA)).toBe(true);
    expect(JSON.parse(h[1]!.domainEvtData)).toEqual({ title: "b" });
    expect(typeof h[0]!.domainEvtData).toBe("string");
    expect(h[0]!.createdAt).toBeGreaterThan(1.6e18);
    // Each event names the command that produced it (causationId) and its chain (correlationId: here the same command).
    expect(h.map((e) => e.causationId === e.correlationId && typeof e.causationId === "string")).toEqual([true, true, true]);
    expect(new Set(h.map((e) => e.causationId)).size).toBe(3);
    expect(Object.keys(h[0]!).sort()).toEqual([
      "causationId",
      "correlationId",
      "createdAt",
      "domainEvtData",
      "domainEvtName",
      "eventUuid",
      "senderIdentityUuid",
      "senderTenantUuid",
      "version",
    ]);
    // nothing history-specific was appended
    expect(await facade.eventRepository.headPosition()).toBe(3);
    await facade.stop();
  });

  it("a list with history makes one repository call for the whole page", async () => {
    const { facade, repo } = await setup();
    for (let i = 1; i <= 100; i++) await facade.dispatch(CreateTodo, { todoUuid: uuid(i), title: `t${i}` }, { reqCtx: ctx(tenantA, "i") });
    for (let i = 1; i <= 100; i += 2)
      await facade.dispatch(RenameTodo, { todoUuid: uuid(i), title: `r${i}` }, { reqCtx: ctx(tenantA, "j") });
    await facade.readmodel("TodoProjection", ProjectionReadmodel).idle();
    repo.reset();
    const list = await facade.query(ListTodos, { pageSize: 100, includeHistory: true }, { reqCtx: ctx(tenantA, "x") });
    expect(list.items).toHaveLength(100);
    expect(repo.loadAggregatesCalls).toHaveLength(1);
    expect(repo.loadAggregateCalls).toEqual([]);
    for (const item of list.items) {
      const n = Number.parseInt(item.aggregateUuid.slice(-12), 16);
      expect(item.historyEvents!.map((e) => e.version)).toEqual(n % 2 ? [1, 2] : [1]);
    }
    repo.reset();
    const noHistory = await facade.query(ListTodos, { pageSize: 100 }, { reqCtx: ctx(tenantA, "x") });
    expect(noHistory.items.every((i) => !("historyEvents" in i))).toBe(true);
    expect(repo.loadAggregatesCalls).toEqual([]);
    await facade.stop();
  });
});
