/**
 * The demo: the Todo domain on the embedded default (SQLite in one file).
 * Run it twice: the second run restores the readmodel from its checkpoint
 * instead of replaying from zero, and says so.
 *
 *   npm run demo                  # data in .data/todo-demo.db
 *   MNEME_DEMO_DB=/tmp/x.db npm run demo
 */
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { createFacade, newUuid, type Event, type RequestContext } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { CompleteTodo, CreateTodo, GetTodo, ListTodos, RenameTodo, registerTodo } from "./todo-domain.js";

const filename = resolve(process.env.MNEME_DEMO_DB ?? ".data/todo-demo.db");
mkdirSync(dirname(filename), { recursive: true });

const facade = createFacade({ appName: "todo-demo", version: "1.0.0", systemEvents: true, backend: createSqliteBackends({ filename }) });
const projection = registerTodo(facade);
await facade.start();

const restore = projection.getMetrics().lastRestore;
console.log(`mneme demo on ${filename}`);
if (restore !== undefined && restore.afterPosition > 0) {
  console.log(
    `restored TodoProjection from its checkpoint at position ${restore.afterPosition}: replayed ${restore.eventsReplayed} event(s), not the whole history`,
  );
} else {
  console.log(`first run: TodoProjection built from position 0 (${restore?.eventsReplayed ?? 0} event(s) replayed)`);
}

// A request context as an HTTP layer would build it from a session (see docs/auth.md).
const reqCtx: RequestContext = {
  senderAccountUuid: "0190f5e4-0000-7000-8000-0000000000a1",
  senderSessionUuid: "0190f5e4-0000-7000-8000-0000000000b1",
  senderIdentityUuid: "0190f5e4-0000-7000-8000-0000000000c1",
  senderTenantUuid: "0190f5e4-0000-7000-8000-0000000000d1",
};

/** "TodoRenamed (the todo's version 2, position 5)": the aggregate's version after the event, and its place in the store. */
const appended = (events: readonly Event[]) =>
  events.map((e) => `${e.name} (the todo's version ${e.version}, position ${e.position})`).join(", ");

const todoUuid = newUuid();
const created = await facade.dispatch(CreateTodo, { todoUuid, title: "Write the readme" }, { reqCtx, waitToFinish: true });
console.log(`CreateTodo   -> ${appended(created.events)}`);
const renamed = await facade.dispatch(RenameTodo, { todoUuid, title: "Write a better readme" }, { reqCtx, waitToFinish: true });
console.log(`RenameTodo   -> ${appended(renamed.events)}`);
const done = await facade.dispatch(CompleteTodo, { todoUuid }, { reqCtx, waitToFinish: true });
console.log(`CompleteTodo -> ${appended(done.events)}`);

try {
  await facade.dispatch(CreateTodo, { todoUuid, title: "again" }, { reqCtx: {} });
} catch (e) {
  console.log(`anonymous CreateTodo is denied: ${(e as { code: string }).code}`);
}

// Another tenant's user knows the uuid, but todos belong to the tenant of their first event.
const stranger: RequestContext = {
  ...reqCtx,
  senderIdentityUuid: "0190f5e4-0000-7000-8000-0000000000c2",
  senderTenantUuid: "0190f5e4-0000-7000-8000-0000000000d2",
};
try {
  await facade.dispatch(RenameTodo, { todoUuid, title: "mine now" }, { reqCtx: stranger });
} catch (e) {
  console.log(`RenameTodo from another tenant is refused: ${(e as { code: string }).code}`);
}
console.log(
  `GetTodo from another tenant -> ${JSON.stringify(await facade.query(GetTodo, { todoUuid }, { reqCtx: stranger })) ?? "undefined"}`,
);

const item = await facade.query(GetTodo, { todoUuid, includeHistory: true }, { reqCtx });
console.log(
  `GetTodo      -> "${item?.model.title}" done=${item?.model.done} version ${item?.version}; history: ${item?.historyEvents?.map((h) => h.domainEvtName).join(" > ")}`,
);
const list = await facade.query(ListTodos, { pageSize: 5 }, { reqCtx });
console.log(`ListTodos    -> ${list.total} todo(s) in this tenant`);
const handlers = facade.runtime
  .listEventHandlers()
  .map((h) => `${h.eventHandlerName} ${h.state}/${h.restorationState} at ${h.lastPosition}`);
console.log(`Runtime      -> ${facade.runtime.listCommands().length} commands, handlers: ${handlers.join("; ")}`);

await facade.stop();
