/**
 * The Todo domain of the demo: an aggregate, three commands, two queries and a
 * projection readmodel with history on demand. Todos are tenant-scoped (the
 * default): a user of another tenant can neither load, change nor read them.
 * The definition (tokens, aggregate) is shared by every facade; `installTodo`
 * is the install step that attaches the handlers, run once per facade by `registerTodo`.
 */
import {
  type DomainInstaller,
  type Facade,
  MnemeError,
  type ProjectionList,
  type ProjectionModel,
  ProjectionReadmodel,
  defineDomain,
} from "mneme";

export interface CreateTodo {
  /** @format uuid */
  todoUuid: string;
  title: string;
}
export interface RenameTodo {
  /** @format uuid */
  todoUuid: string;
  title: string;
}
export interface CompleteTodo {
  /** @format uuid */
  todoUuid: string;
}
export interface GetTodo {
  /** @format uuid */
  todoUuid: string;
  includeHistory?: boolean;
}
export interface ListTodos {
  page?: number;
  pageSize?: number;
  includeHistory?: boolean;
}
export interface TodoCreated {
  title: string;
}
export interface TodoRenamed {
  title: string;
}
export interface TodoCompleted {
  completed: true;
}

export interface TodoState {
  exists: boolean;
  title: string;
  done: boolean;
}

const titleSchema = { type: "string", minLength: 1, maxLength: 200 };
const uuidSchema = { type: "string", format: "uuid" };
const object = (properties: Record<string, unknown>, required: string[]) => ({
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties,
  required,
  additionalProperties: false,
});

export const Todo = defineDomain("Todo", { description: "Todo items" });

export const CreateTodo = Todo.command<CreateTodo>("CreateTodo", {
  description: "Create a todo item",
  schema: object({ todoUuid: uuidSchema, title: titleSchema }, ["todoUuid", "title"]),
});
export const RenameTodo = Todo.command<RenameTodo>("RenameTodo", {
  description: "Give a todo item a new title",
  schema: object({ todoUuid: uuidSchema, title: titleSchema }, ["todoUuid", "title"]),
});
export const CompleteTodo = Todo.command<CompleteTodo>("CompleteTodo", {
  description: "Mark a todo item as done",
  schema: object({ todoUuid: uuidSchema }, ["todoUuid"]),
});
export const TodoCreated = Todo.event<TodoCreated>("TodoCreated");
export const TodoRenamed = Todo.event<TodoRenamed>("TodoRenamed");
export const TodoCompleted = Todo.event<TodoCompleted>("TodoCompleted");

export const GetTodo = Todo.query<GetTodo, ProjectionModel<TodoState> | undefined>("GetTodo", {
  description: "One todo item, with its history on request",
  schema: object({ todoUuid: uuidSchema, includeHistory: { type: "boolean" } }, ["todoUuid"]),
});
export const ListTodos = Todo.query<ListTodos, ProjectionList<TodoState>>("ListTodos", {
  description: "A page of todo items of the sender's tenant",
  schema: object(
    {
      page: { type: "integer", minimum: 1 },
      pageSize: { type: "integer", minimum: 1, maximum: 1000 },
      includeHistory: { type: "boolean" },
    },
    [],
  ),
});

export const TodoAggregate = Todo.aggregate<TodoState>("Todo", {
  initialState: () => ({ exists: false, title: "", done: false }),
  evolve: {
    TodoCreated: (s, p: TodoCreated) => ({ ...s, exists: true, title: p.title }),
    TodoRenamed: (s, p: TodoRenamed) => ({ ...s, title: p.title }),
    TodoCompleted: (s) => ({ ...s, done: true }),
  },
});

/** The projection of every todo; registered by `registerTodo`. */
export class TodoProjection extends ProjectionReadmodel<TodoState> {
  constructor(facade: Facade) {
    super(facade, { aggregate: TodoAggregate, name: "TodoProjection" });
  }
}

/**
 * The Todo domain's install step, the one place its handlers are attached: the
 * commands load the aggregate; the queries read the projection they are given,
 * so each facade's queries read that facade's projection. `ctx.readmodel` gives
 * the view of the caller's tenant: another tenant's todo is undefined, lists
 * hold this tenant's todos only.
 */
export function installTodo(d: DomainInstaller, todos: TodoProjection): void {
  d.handleCommand(CreateTodo, async (ctx, _cmd, p) => {
    const todo = await ctx.aggregates.load(TodoAggregate, p.todoUuid);
    if (todo.state.exists) throw new MnemeError("CONFLICT", `todo ${p.todoUuid} exists already`);
    return [TodoCreated.create(p.todoUuid, { title: p.title })];
  });

  d.handleCommand(RenameTodo, async (ctx, _cmd, p) => {
    const todo = await ctx.aggregates.load(TodoAggregate, p.todoUuid);
    if (!todo.state.exists) throw new MnemeError("NOT_FOUND", `todo ${p.todoUuid} does not exist`);
    if (todo.state.title === p.title) return [];
    return [TodoRenamed.create(p.todoUuid, { title: p.title })];
  });

  d.handleCommand(CompleteTodo, async (ctx, _cmd, p) => {
    const todo = await ctx.aggregates.load(TodoAggregate, p.todoUuid);
    if (!todo.state.exists) throw new MnemeError("NOT_FOUND", `todo ${p.todoUuid} does not exist`);
    if (todo.state.done) return [];
    return [TodoCompleted.create(p.todoUuid, { completed: true })];
  });

  d.handleQuery(GetTodo, (ctx, _q, p) =>
    ctx.readmodel(todos).getModel(p.todoUuid, p.includeHistory === true ? { includeHistory: true } : {}),
  );
  d.handleQuery(ListTodos, (ctx, _q, p) =>
    ctx.readmodel(todos).getModelList({
      ...(p.page === undefined ? {} : { page: p.page }),
      ...(p.pageSize === undefined ? {} : { pageSize: p.pageSize }),
      ...(p.includeHistory === true ? { includeHistory: true } : {}),
    }),
  );
}

/** Installs the domain and registers its readmodel on a facade (any number of facades); returns the readmodel. */
export function registerTodo(facade: Facade): TodoProjection {
  const projection = new TodoProjection(facade);
  facade.registerDomain(Todo, (d) => installTodo(d, projection));
  facade.registerReadmodel(projection);
  return projection;
}
