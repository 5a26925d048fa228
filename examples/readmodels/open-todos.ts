/**
 * docs/readmodels.md's example: a custom readmodel (open todos per tenant),
 * its restoration, and history on demand. test/project/examples.unit.test.ts runs it.
 */
import { BaseReadmodel, createFacade, type Facade, type RequestContext, withRestoreBatchSize } from "mneme";
import { CompleteTodo, CreateTodo, GetTodo, TodoCompleted, TodoCreated, registerTodo } from "../todo/todo-domain.js";

interface OpenCount {
  tenantUuid: string;
  open: number;
}

/** Counts open todos per tenant: a BaseReadmodel with two handlers and one collection. */
export class OpenTodos extends BaseReadmodel {
  constructor(facade: Facade) {
    super(facade, withRestoreBatchSize(500));
    this.domain = "Todo";
    this.name = "OpenTodos";
    this.addDomainEventHandler(TodoCreated, (_ctx, event) => this.#add(event.tenantUuid, +1));
    this.addDomainEventHandler(TodoCompleted, (_ctx, event) => this.#add(event.tenantUuid, -1));
  }

  async #add(tenantUuid: string, delta: number): Promise<void> {
    const counts = this.collection<OpenCount>("counts");
    const current = await counts.get(tenantUuid);
    await counts.put(tenantUuid, { tenantUuid, open: (current?.open ?? 0) + delta });
  }

  /** Open todos of a tenant. */
  async openIn(tenantUuid: string): Promise<number> {
    return (await this.collection<OpenCount>("counts").get(tenantUuid))?.open ?? 0;
  }

  /** What a handler gets from `ctx.readmodel(openTodos)`: its own tenant's count only. */
  forTenant(tenantUuid: string): { open(): Promise<number> } {
    return { open: () => this.openIn(tenantUuid) };
  }
}

/** Runs the example; returns what it observed. */
export async function main(): Promise<{ open: number; afterRestore: number; history: string[]; replayed: number }> {
  const facade = createFacade({ appName: "readmodel-example" });
  registerTodo(facade);
  const openTodos = new OpenTodos(facade);
  facade.registerReadmodel(openTodos);
  await facade.start();

  const reqCtx: RequestContext = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "tenant-1" };
  const ids = ["0190f5e4-8e4a-7cc4-9f4e-000000000001", "0190f5e4-8e4a-7cc4-9f4e-000000000002", "0190f5e4-8e4a-7cc4-9f4e-000000000003"];
  for (const todoUuid of ids) await facade.dispatch(CreateTodo, { todoUuid, title: `todo ${todoUuid.slice(-1)}` }, { reqCtx });
  await facade.dispatch(CompleteTodo, { todoUuid: ids[0]! }, { reqCtx, waitToFinish: true });
  const open = await openTodos.openIn("tenant-1");

  // Rebuild from the event store, as the Runtime's `restore` with restoreFromZero does.
  const report = await openTodos.restoreState(undefined, { fromZero: true }).done;
  const afterRestore = await openTodos.openIn("tenant-1");

  // History on demand: read from the event store now, nothing stored for it.
  const item = await facade.query(GetTodo, { todoUuid: ids[0]!, includeHistory: true }, { reqCtx });
  const history = item?.historyEvents?.map((h) => `${h.version}:${h.domainEvtName} by ${h.senderIdentityUuid}`) ?? [];

  await facade.stop();
  return { open, afterRestore, history, replayed: report.eventsReplayed };
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await main());
