// The README's "A whole app in 36 lines" example, kept identical to it (but for the file name) and run by test/project/examples.unit.test.ts.
import { createFacade, defineDomain, MnemeError, newUuid, type ProjectionModel, ProjectionReadmodel } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";

export interface CreateTodo { todoUuid: string; title: string }
export interface TodoCreated { title: string }
interface TodoState { exists: boolean; title: string }

const Todo = defineDomain("Todo", { description: "Todo items" });
const CreateTodo = Todo.command<CreateTodo>("CreateTodo", { description: "Create a todo item" }); // default: authorized
const GetTodo = Todo.query<{ todoUuid: string }, ProjectionModel<TodoState> | undefined>("GetTodo");
const TodoCreated = Todo.event<TodoCreated>("TodoCreated");
const TodoAggregate = Todo.aggregate<TodoState>("Todo", {              // belongs to the tenant of its first event
  initialState: () => ({ exists: false, title: "" }),
  evolve: { TodoCreated: (_s, p: TodoCreated) => ({ exists: true, title: p.title }) },
});

const facade = createFacade({ appName: "todo", backend: createSqliteBackends({ filename: process.env.MNEME_README_DB ?? "todo.db" }) });
const todos = new ProjectionReadmodel(facade, { aggregate: TodoAggregate });
facade.registerDomain(Todo, (d) => {                   // the install step: the handlers, in this facade
  d.handleCommand(CreateTodo, async (ctx, _cmd, p) => {
    const todo = await ctx.aggregates.load(TodoAggregate, p.todoUuid); // another tenant's todo: NOT_FOUND
    if (todo.state.exists) throw new MnemeError("CONFLICT", "todo exists");
    return [TodoCreated.create(p.todoUuid, { title: p.title })];
  });
  d.handleQuery(GetTodo, (ctx, _q, p) => ctx.readmodel(todos).getModel(p.todoUuid)); // the caller's tenant only
});
facade.registerReadmodel(todos);
await facade.start();                                   // restores readmodels from their checkpoints
const reqCtx = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t" };
const todoUuid = newUuid();
await facade.dispatch(CreateTodo, { todoUuid, title: "Ship it" }, { reqCtx, waitToFinish: true });
console.log(await facade.query(GetTodo, { todoUuid }, { reqCtx }));                 // the model
console.log(await facade.query(GetTodo, { todoUuid }, { reqCtx: { ...reqCtx, senderTenantUuid: "u" } })); // undefined
console.log(await todos.getModel(todoUuid, { includeHistory: true }));  // trusted code: unscoped, history from the store
console.log(facade.runtime.listCommands());            // the Runtime: lists, metrics, control, schemas, stores
await facade.stop();
