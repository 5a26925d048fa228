/**
 * docs/readmodels.md's Collections example, and the readmodel that
 * docs/testing.md tests: one document per todo in the collection "todos",
 * listed, counted and looked up. test/project/docs-testing.unit.test.ts runs it.
 */
import { BaseReadmodel, type Facade } from "mneme";
import { type ReadmodelCollection } from "mneme/store";
import { TodoCompleted, TodoCreated, TodoRenamed } from "../todo/todo-domain.js";

export interface BoardItem {
  todoUuid: string;
  tenantUuid: string;
  title: string;
  done: boolean;
}

/** The todos of every tenant, one document each; reads take the tenant. */
export class TodoBoard extends BaseReadmodel {
  constructor(facade: Facade) {
    super(facade);
    this.domain = "Todo";
    this.name = "TodoBoard";
    this.addDomainEventHandler(TodoCreated, (_ctx, e, p) =>
      this.#todos().put(e.aggregateUuid, { todoUuid: e.aggregateUuid, tenantUuid: e.tenantUuid, title: p.title, done: false }),
    );
    this.addDomainEventHandler(TodoRenamed, (_ctx, e, p) => this.#update(e.aggregateUuid, { title: p.title }));
    this.addDomainEventHandler(TodoCompleted, (_ctx, e) => this.#update(e.aggregateUuid, { done: true }));
  }

  #todos(): ReadmodelCollection<BoardItem> {
    return this.collection<BoardItem>("todos"); // the backend's collection "TodoBoard:todos"
  }

  async #update(todoUuid: string, change: Partial<BoardItem>): Promise<void> {
    const item = await this.#todos().get(todoUuid);
    if (item !== undefined) await this.#todos().put(todoUuid, { ...item, ...change });
  }

  /** One page of a tenant's open todos, by title, and how many there are. */
  async openTodos(tenantUuid: string, page = 1, pageSize = 20): Promise<{ items: BoardItem[]; total: number }> {
    const where = { tenantUuid, done: false };
    const items = await this.#todos().list({ where, orderBy: "title", offset: (page - 1) * pageSize, limit: pageSize });
    return { items, total: await this.#todos().count(where) };
  }

  /** Titles of the given todos that exist in this tenant. */
  async titles(tenantUuid: string, todoUuids: readonly string[]): Promise<Map<string, string>> {
    const found = await this.#todos().getMany(todoUuids); // only the keys that exist
    return new Map([...found].filter(([, t]) => t.tenantUuid === tenantUuid).map(([uuid, t]) => [uuid, t.title]));
  }

  /** What a command or query handler gets from `ctx.readmodel(board)`: its own tenant's todos only. */
  forTenant(tenantUuid: string): { openTodos(page?: number, pageSize?: number): Promise<{ items: BoardItem[]; total: number }> } {
    return { openTodos: (page, pageSize) => this.openTodos(tenantUuid, page, pageSize) };
  }
}
