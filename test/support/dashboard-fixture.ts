/**
 * Fixture of the dashboard tests and of scripts/dashboard-screenshots.mjs: the
 * Todo example (a readmodel) with the built-in domains on in-memory backends,
 * served by createHttpHandler(facade, { dashboard: true }) through node:http on
 * 127.0.0.1, with an administrator and an operator who may read the Runtime of
 * an ordinary tenant but, not being in the system tenant, never the stores.
 * A process manager schedules a far-off CompleteTodo for todos titled
 * "remind: ..." and a reactor fails for todos titled "undeliverable: ...",
 * so the dashboard has scheduled commands and dead letters to show; the Desk
 * domain's Ping has no payload schema.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type Facade, type FacadeOptions, type RequestContext, createFacade, defineDomain, newUuid } from "mneme";
import {
  AssignGroup,
  CreateGroup,
  CreateIdentity,
  CreateTenant,
  RegisterAccount,
  registerDefaults,
  resolveCredentials,
  accountRoutes,
  Login,
} from "mneme/defaults";
import { type HttpHandlerOptions, createHttpHandler, toNodeListener } from "mneme/http";
import { ProcessManager, Reactor } from "mneme/reactions";
import { CompleteTodo, CreateTodo, TodoCreated, registerTodo } from "../../examples/todo/todo-domain.js";

export const ADMIN = { email: "admin@example.org", password: "admin-password-1" } as const;
export const OPERATOR = { email: "ops@example.org", password: "operator-password-1" } as const;

export interface DashboardWorld {
  readonly facade: Facade;
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly systemTenantUuid: string;
  readonly opsTenantUuid: string;
  /** The administrator's request context (system tenant). */
  readonly admin: RequestContext;
  /** Creates one todo as the administrator; its command's uuid. */
  createTodo(title: string): Promise<string>;
  /** Creates `n` todos as the administrator (in the system tenant), waiting for the readmodels. */
  createTodos(n: number): Promise<void>;
  /** Creates a todo titled "remind: <title>": its process manager schedules a CompleteTodo a year ahead. */
  createReminder(title: string): Promise<string>;
  /** Creates a todo titled "undeliverable: <title>": its reactor's one attempt fails, a dead letter. */
  createUndeliverable(title: string): Promise<string>;
  /** Drops every open connection (the page's stream too); the server keeps listening. */
  dropConnections(): void;
  close(): Promise<void>;
}

export async function startDashboardWorld(
  opts: {
    facade?: FacadeOptions;
    http?: HttpHandlerOptions;
    port?: number;
    /** Registers more handlers (a broker's publisher and consumer) before the facade starts. */
    register?: (facade: Facade) => void;
  } = {},
): Promise<DashboardWorld> {
  const facade = createFacade({ appName: "todo-ops", version: "1.4.2", systemEvents: true, ...opts.facade });
  const ids = await registerDefaults(facade, { admin: { ...ADMIN, name: "Ada Admin" }, passwordHashing: { N: 1024, r: 8, p: 1 } });
  registerTodo(facade);
  const Desk = defineDomain("Desk", { description: "A domain without payload schemas" });
  Desk.handleCommand(Desk.command<Record<string, never>>("Ping", { description: "Does nothing; has no schema" }), () => []);
  facade.registerDomain(Desk);
  const reminders = new ProcessManager<{ reminded: number }>(facade, {
    name: "Reminders",
    domain: "Todo",
    initialState: () => ({ reminded: 0 }),
  }).on(TodoCreated, (ctx, st, p, e) => {
    if (!p.title.startsWith("remind: ")) return st;
    ctx.schedule(CompleteTodo, { todoUuid: e.aggregateUuid }, { at: Date.now() + 365 * 86_400_000 });
    return { reminded: st.reminded + 1 };
  });
  const notifier = new Reactor(facade, { name: "Notifier", domain: "Todo", retry: { maxAttempts: 1 } }).on(TodoCreated, (e) => {
    if (e.payload.title.startsWith("undeliverable: ")) throw new Error(`no mailbox for "${e.payload.title}"`);
  });
  facade.registerReadmodel(reminders);
  facade.registerReadmodel(notifier);
  opts.register?.(facade);
  await facade.start();

  const adminLogin = (await facade.dispatch(Login, ADMIN, { waitToFinish: true })).result!;
  const admin = (await resolveCredentials(facade, {
    sessionUuid: adminLogin.sessionUuid,
    sessionKey: adminLogin.sessionKey,
    identityUuid: ids.adminIdentityUuid,
  }))!;
  const wait = { reqCtx: admin, waitToFinish: true } as const;
  const opsTenantUuid = (await facade.dispatch(CreateTenant, { name: "Operations" }, wait)).result!.tenantUuid;
  const opsAccount = (await facade.dispatch(RegisterAccount, { ...OPERATOR, name: "Otto Operator" }, { waitToFinish: true })).result!
    .accountUuid;
  const opsIdentity = (await facade.dispatch(CreateIdentity, { accountUuid: opsAccount, tenantUuid: opsTenantUuid }, wait)).result!
    .identityUuid;
  const group = (
    await facade.dispatch(CreateGroup, { tenantUuid: opsTenantUuid, name: "operators", permissions: ["Runtime.*", "Todo.*"] }, wait)
  ).result!.groupUuid;
  await facade.dispatch(AssignGroup, { identityUuid: opsIdentity, groupUuid: group }, wait);

  const handler = createHttpHandler(facade, { dashboard: true, modules: [accountRoutes()], ...opts.http });
  const listener = toNodeListener(handler);
  const server = createServer((req, res) => void listener(req, res));
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    facade,
    url: `http://127.0.0.1:${port}`,
    systemTenantUuid: ids.systemTenantUuid,
    opsTenantUuid,
    admin,
    async createTodo(title) {
      return (await facade.dispatch(CreateTodo, { todoUuid: newUuid(), title }, wait)).commandUuid;
    },
    async createTodos(n) {
      for (let i = 0; i < n; i++) await facade.dispatch(CreateTodo, { todoUuid: newUuid(), title: `Todo ${i + 1}` }, wait);
    },
    async createReminder(title) {
      const todoUuid = newUuid();
      await facade.dispatch(CreateTodo, { todoUuid, title: `remind: ${title}` }, wait);
      await reminders.outbox.drain();
      return todoUuid;
    },
    async createUndeliverable(title) {
      const todoUuid = newUuid();
      await facade.dispatch(CreateTodo, { todoUuid, title: `undeliverable: ${title}` }, wait);
      await notifier.outbox.drain();
      return todoUuid;
    },
    dropConnections: () => server.closeAllConnections(),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await facade.stop();
    },
  };
}
