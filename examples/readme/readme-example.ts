// The README's "In 30 lines" example, kept identical to it (but for the file name) and run by test/examples.unit.test.ts.
import { createFacade, defineDomain, MnemeError, ProjectionReadmodel } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";

export interface CreateTodo { todoUuid: string; title: string }
export interface TodoCreated { title: string }

const Todo = defineDomain("Todo", { description: "Todo items" });
const CreateTodo = Todo.command<CreateTodo>("CreateTodo", { description: "Create a todo item" }); // default: authorized
const TodoCreated = Todo.event<TodoCreated>("TodoCreated");
const TodoAggregate = Todo.aggregate("Todo", {
  initialState: () => ({ exists: false, title: "" }),
  evolve: { TodoCreated: (_s, p: TodoCreated) => ({ exists: true, title: p.title }) },
});
Todo.handleCommand(CreateTodo, async (ctx, _cmd, p) => {
  const todo = await ctx.aggregates.load(TodoAggregate, p.todoUuid);   // { state, version }: version is the expected one
  if (todo.state.exists) throw new MnemeError("CONFLICT", "todo exists");
  return [TodoCreated.create(p.todoUuid, { title: p.title })];
});

const facade = createFacade({ appName: "todo", ...createSqliteBackends({ filename: process.env.MNEME_README_DB ?? "todo.db" }) });
facade.registerDomain(Todo);
const todos = new ProjectionReadmodel(facade, { aggregate: TodoAggregate });
facade.registerReadmodel(todos);
await facade.start();                                   // restores readmodels from their checkpoints
const reqCtx = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t" };
await facade.dispatch(CreateTodo, { todoUuid: "t-1", title: "Ship it" }, { reqCtx, waitToFinish: true });
console.log(await todos.getModel("t-1", { includeHistory: true }));   // model + historyEvents from the event store
console.log(facade.runtime.listCommands());            // the Runtime: lists, metrics, control, schemas, stores
await facade.stop();
