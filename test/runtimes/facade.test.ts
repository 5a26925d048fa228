/**
 * A facade end to end on the runtime running this file, against the built
 * package: commands (aggregates, a conflict), queries answered by a projection
 * and by a readmodel with a collection, tenants kept apart, on the in-memory
 * backend, on Postgres and on SQLite through the runtime's own driver, where a
 * second instance on the same schema or file reads and writes what the first did.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { BaseReadmodel, type Facade, type RequestContext, createFacade, defineDomain, isMnemeError, newUuid } from "mneme";
import { createMemoryBackends } from "mneme/memory";
import type { Engine } from "mneme/store";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { CompleteTodo, CreateTodo, GetTodo, ListTodos, RenameTodo, TodoCreated, registerTodo } from "../../examples/todo/todo-domain.js";
import { postgresScratch } from "../support/postgres-scratch.js";
import { currentRuntime, runtimeSqliteDriver } from "./runtime.js";

const pg = postgresScratch("mneme_rt_facade");
const dir = mkdtempSync(join(tmpdir(), "mneme-rt-facade-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ctxOf = (tenant: string, n: number): RequestContext => ({
  senderAccountUuid: `0190f5e4-0000-7000-8000-0000000000a${n}`,
  senderSessionUuid: `0190f5e4-0000-7000-8000-0000000000b${n}`,
  senderIdentityUuid: `0190f5e4-0000-7000-8000-0000000000c${n}`,
  senderTenantUuid: tenant,
});
const alice = ctxOf("0190f5e4-0000-7000-8000-00000000d001", 1);
const bob = ctxOf("0190f5e4-0000-7000-8000-00000000d002", 2);

/** Titles per tenant in a collection: a readmodel whose handler writes through the batch's transaction. */
const Stats = defineDomain("Stats");
const CountTitles = Stats.query<Record<string, never>, { titles: string[] }>("CountTitles");
class TitleIndex extends BaseReadmodel {
  constructor(facade: Facade) {
    super(facade);
    this.domain = "Stats";
    this.name = "TitleIndex";
    this.addDomainEventHandler(TodoCreated, async (_ctx, event, p) => {
      await this.collection<{ title: string }>("titles").put(event.aggregateUuid, { title: p.title });
    });
  }
  async titles(): Promise<string[]> {
    return (await this.collection<{ title: string }>("titles").list({ limit: 100 })).map((d) => d.title).sort();
  }
}

function app(backend: Engine): Facade {
  const facade = createFacade({ appName: `runtime-${currentRuntime()}`, version: "1.0.0", backend });
  registerTodo(facade);
  const index = new TitleIndex(facade);
  // asTenant runs the reads in the tenant's scope (AsyncLocalStorage): each tenant sees its own titles.
  facade.registerDomain(Stats, (d) =>
    d.handleQuery(CountTitles, async (ctx) => ({ titles: await index.asTenant(ctx.tenantUuid).titles() })),
  );
  facade.registerReadmodel(index);
  return facade;
}

const started: Facade[] = [];
async function start(backend: Engine): Promise<Facade> {
  const f = app(backend);
  started.push(f);
  await f.start();
  return f;
}
afterEach(async () => {
  for (const f of started.splice(0).reverse()) await f.stop();
});

/** A fresh place to keep an app's data; each call of what it returns is one more instance's backend on it. */
const memoryPlace = (): (() => Engine) => {
  const backend = createMemoryBackends();
  return () => backend;
};
const postgresPlace = (): (() => Engine) => {
  const schema = pg.newSchema();
  return () => createPostgresBackends({ pool: pg.pool, schema });
};
let fileNo = 0;
const sqlitePlace = (): (() => Engine) => {
  const filename = join(dir, `app${++fileNo}.db`);
  return () => createSqliteBackends({ filename, driver: runtimeSqliteDriver() });
};
const places: [string, () => () => Engine][] = [
  ["memory", memoryPlace],
  ["postgres", postgresPlace],
  [`SQLite (${runtimeSqliteDriver()})`, sqlitePlace],
];

describe.each(places)("a facade on %s", (_name, place) => {
  it("runs commands and answers queries from its readmodels, each tenant its own", async () => {
    const f = await start(place()());
    const todo = newUuid();
    await f.dispatch(CreateTodo, { todoUuid: todo, title: "write the runtime docs" }, { reqCtx: alice, waitToFinish: true });
    await f.dispatch(RenameTodo, { todoUuid: todo, title: "write docs/runtimes.md" }, { reqCtx: alice, waitToFinish: true });
    await f.dispatch(CompleteTodo, { todoUuid: todo }, { reqCtx: alice, waitToFinish: true });
    await f.dispatch(CreateTodo, { todoUuid: newUuid(), title: "bob's" }, { reqCtx: bob, waitToFinish: true });

    const got = await f.query(GetTodo, { todoUuid: todo, includeHistory: true }, { reqCtx: alice });
    expect(got?.model).toEqual({ exists: true, title: "write docs/runtimes.md", done: true });
    expect(got?.version).toBe(3);
    expect(got?.historyEvents?.map((e) => e.domainEvtName)).toEqual(["TodoCreated", "TodoRenamed", "TodoCompleted"]);
    // Another tenant's todo is not there for bob, and his list holds his own only.
    expect(await f.query(GetTodo, { todoUuid: todo }, { reqCtx: bob })).toBeUndefined();
    const list = await f.query(ListTodos, {}, { reqCtx: bob });
    expect(list.items.map((i) => i.model.title)).toEqual(["bob's"]);
    expect((await f.query(CountTitles, {}, { reqCtx: alice })).titles).toEqual(["write the runtime docs"]);
    expect((await f.query(CountTitles, {}, { reqCtx: bob })).titles).toEqual(["bob's"]);

    // A second create of the same todo is refused by its aggregate, and nothing is appended.
    const again = await f.dispatch(CreateTodo, { todoUuid: todo, title: "again" }, { reqCtx: alice }).catch((e: unknown) => e);
    expect(isMnemeError(again, "CONFLICT")).toBe(true);
    const invalid = await f.dispatch(CreateTodo, { todoUuid: "not a uuid", title: "" }, { reqCtx: alice }).catch((e: unknown) => e);
    expect(isMnemeError(invalid, "VALIDATION_FAILED")).toBe(true);
  });

  it("concurrent commands on one aggregate: each applied once, in one order", async () => {
    const f = await start(place()());
    const todo = newUuid();
    await f.dispatch(CreateTodo, { todoUuid: todo, title: "t0" }, { reqCtx: alice });
    const titles = Array.from({ length: 20 }, (_, i) => `t${i + 1}`);
    const results = await Promise.allSettled(titles.map((title) => f.dispatch(RenameTodo, { todoUuid: todo, title }, { reqCtx: alice })));
    // Every rename either appended its event or lost a race (CONFLICT); none was applied twice or lost silently.
    const won = results.filter((r) => r.status === "fulfilled").length;
    for (const r of results) if (r.status === "rejected") expect(isMnemeError(r.reason, "CONFLICT")).toBe(true);
    expect(won).toBeGreaterThan(0);
    await f.dispatch(CompleteTodo, { todoUuid: todo }, { reqCtx: alice, waitToFinish: true });
    const got = await f.query(GetTodo, { todoUuid: todo }, { reqCtx: alice });
    expect(got?.version).toBe(1 + won + 1);
  });
});

describe.each([
  ["Postgres schema", postgresPlace],
  [`SQLite file (${runtimeSqliteDriver()})`, sqlitePlace],
])("facades on one %s", (_name, place) => {
  it("a second instance reads and writes what the first did", async () => {
    const next = place();
    const a = await start(next());
    const b = await start(next());
    const todo = newUuid();
    await a.dispatch(CreateTodo, { todoUuid: todo, title: "from a" }, { reqCtx: alice, waitToFinish: true });
    await b.dispatch(CompleteTodo, { todoUuid: todo }, { reqCtx: alice, waitToFinish: true });
    for (const f of [a, b]) {
      const got = await f.query(GetTodo, { todoUuid: todo }, { reqCtx: alice });
      expect(got?.model).toEqual({ exists: true, title: "from a", done: true });
    }
    // b's create of the same todo sees a's event (the aggregate is loaded from the shared store).
    const again = await b.dispatch(CreateTodo, { todoUuid: todo, title: "from b" }, { reqCtx: alice }).catch((e: unknown) => e);
    expect(isMnemeError(again, "CONFLICT")).toBe(true);
  });
});
