/**
 * The token-keyed evolve form: `evolve: [on(EventToken, (s, p) => ...)]` and
 * `evolve: (on) => [...]`. The payload type comes from the token (of this
 * domain or another), the fold is the object form's, and registration checks
 * the steps as it checks object keys.
 */
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, expectTypeOf, it } from "vitest";
import { type AggregateType, createFacade, defineDomain, type Event, isMnemeError, newUuid, on } from "mneme";
import type { EvolveStep, StateTypeNotGiven } from "mneme/types";

interface TodoCreated {
  title: string;
}
interface TodoRenamed {
  newTitle: string;
}
interface TodoState {
  exists: boolean;
  title: string;
  removedBy: string;
}

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    return isMnemeError(e) ? e.code : "not a MnemeError";
  }
  return "no error";
}

let position = 0;
function stored(domain: string, name: string, payload: unknown, aggregateUuid = "agg-1"): Event {
  position += 1;
  return {
    eventUuid: `e-${position}`,
    position,
    domain,
    name,
    aggregateUuid,
    version: position,
    payload,
    createdAt: position,
  } as unknown as Event;
}

function fold<S>(a: AggregateType<S>, events: Event[]): S {
  return events.reduce((s, e) => a.apply(s, e), a.initialState());
}

function todoDomains() {
  const Tenant = defineDomain("Tenancy");
  const TenantRemoved = Tenant.event<{ by: string }>("TenantRemoved");
  const Todo = defineDomain("Todo");
  const TodoCreated = Todo.event<TodoCreated>("TodoCreated");
  const TodoRenamed = Todo.event<TodoRenamed>("TodoRenamed");
  return { Tenant, TenantRemoved, Todo, TodoCreated, TodoRenamed };
}

describe("evolve: [on(EventToken, fn)]", () => {
  it("types each payload from its token, of this domain and of another (npm run typecheck fails if an @ts-expect-error compiles)", () => {
    const { TenantRemoved, Todo, TodoCreated, TodoRenamed } = todoDomains();
    const Typed = Todo.aggregate<TodoState>("Typed", {
      initialState: () => ({ exists: false, title: "", removedBy: "" }),
      evolve: [
        on(TodoCreated, (s, p) => ({ ...s, exists: true, title: p.title })),
        on(TodoRenamed, (s, p) => ({ ...s, title: p.newTitle })),
        on(TenantRemoved, (s, p) => ({ ...s, exists: false, removedBy: p.by })),
      ],
    });
    Todo.aggregate<TodoState>("Wrong", {
      initialState: () => ({ exists: false, title: "", removedBy: "" }),
      evolve: [
        // @ts-expect-error -- TodoRenamed's payload has newTitle, not title
        on(TodoRenamed, (s, p) => ({ ...s, title: p.title })),
        // @ts-expect-error -- the state has no field count
        on(TodoCreated, (s) => ({ ...s, count: s.count })),
      ],
    });
    expect(Object.keys(Typed.evolve)).toEqual(["TodoCreated", "TodoRenamed", "Tenancy.TenantRemoved"]);
  });

  it("the function form infers the state from initialState, and types payloads alike", () => {
    const { Todo, TodoCreated, TodoRenamed } = todoDomains();
    const Inferred = Todo.aggregate("Inferred", {
      initialState: () => ({ exists: false, title: "" }),
      evolve: (on) => [
        on(TodoCreated, (s, p) => ({ ...s, exists: true, title: p.title })),
        // @ts-expect-error -- TodoRenamed's payload has newTitle, not title
        on(TodoRenamed, (s, p) => ({ ...s, title: p.title })),
      ],
    });
    const state: { exists: boolean; title: string } = Inferred.initialState();
    expect(state).toEqual({ exists: false, title: "" });
    const step: EvolveStep<{ n: number }, TodoCreated> = on(TodoCreated, (s: { n: number }, p) => ({ n: s.n + p.title.length }));
    expect(step).toMatchObject({ kind: "evolveStep", event: TodoCreated });
    expect(Object.isFrozen(step)).toBe(true);
  });

  it("without the state type, an imported on() in an array is a type error naming the ways out (not unknown deep in a union)", () => {
    const { Todo, TodoCreated } = todoDomains();
    Todo.aggregate("NoStateType", {
      initialState: () => ({ exists: false, title: "" }),
      // @ts-expect-error -- TypeScript does not pass the state inferred from initialState into on() calls in an array
      evolve: [on(TodoCreated, (s, p) => ({ ...s, exists: true, title: p.title }))],
    });
    expectTypeOf(on(TodoCreated, (s) => s)).toEqualTypeOf<EvolveStep<StateTypeNotGiven, TodoCreated>>();
  });

  it("the compiler's message for that form says which forms to write", () => {
    const root = fileURLToPath(new URL("../..", import.meta.url));
    const file = `${root}test/__evolve-form-probe.ts`;
    const source = [
      'import { defineDomain, on } from "../src/index.js";',
      'const Ticket = defineDomain("Ticket");',
      'const TicketOpened = Ticket.event<{ title: string }>("TicketOpened");',
      'export const TicketAggregate = Ticket.aggregate("Ticket", {',
      '  initialState: () => ({ open: false, title: "" }),',
      "  evolve: [on(TicketOpened, (s, p) => ({ ...s, open: true, title: p.title }))],",
      "});",
    ].join("\n");
    const options: ts.CompilerOptions = {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: ["node"],
    };
    const host = ts.createCompilerHost(options);
    const read = host.readFile.bind(host);
    host.readFile = (f) => (f === file ? source : read(f));
    const exists = host.fileExists.bind(host);
    host.fileExists = (f) => f === file || exists(f);
    const program = ts.createProgram([file], options, host);
    const messages = ts
      .getPreEmitDiagnostics(program, program.getSourceFile(file))
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain("give the state type, as D.aggregate<State>(...)");
    expect(messages[0]).toContain("evolve: (on) => [on(...)]");
  }, 60_000);

  it("folds exactly as the object form does, events of other domains included", () => {
    const { TenantRemoved, Todo, TodoCreated, TodoRenamed } = todoDomains();
    const initialState = (): TodoState => ({ exists: false, title: "", removedBy: "" });
    const Tokens = Todo.aggregate<TodoState>("Tokens", {
      initialState,
      evolve: [
        on(TodoCreated, (s, p) => ({ ...s, exists: true, title: p.title })),
        on(TodoRenamed, (s, p) => ({ ...s, title: p.newTitle })),
        on(TenantRemoved, (s, p) => ({ ...s, exists: false, removedBy: p.by })),
      ],
    });
    const Callback = Todo.aggregate("Callback", {
      initialState,
      evolve: (on) => [
        on(TodoCreated, (s, p) => ({ ...s, exists: true, title: p.title })),
        on(TodoRenamed, (s, p) => ({ ...s, title: p.newTitle })),
        on(TenantRemoved, (s, p) => ({ ...s, exists: false, removedBy: p.by })),
      ],
    });
    const Keys = Todo.aggregate<TodoState>("Keys", {
      initialState,
      evolve: {
        TodoCreated: (s, p: TodoCreated) => ({ ...s, exists: true, title: p.title }),
        TodoRenamed: (s, p: TodoRenamed) => ({ ...s, title: p.newTitle }),
        "Tenancy.TenantRemoved": (s, p: { by: string }) => ({ ...s, exists: false, removedBy: p.by }),
      },
    });
    const history = [
      stored("Todo", "TodoCreated", { title: "a" }),
      stored("Todo", "TodoRenamed", { newTitle: "b" }),
      stored("Other", "TodoRenamed", { newTitle: "not ours" }), // same name, another domain: ignored
      stored("Todo", "Unknown", {}),
    ];
    expect(fold(Tokens, history)).toEqual({ exists: true, title: "b", removedBy: "" });
    const removed = [...history, stored("Tenancy", "TenantRemoved", { by: "admin" })];
    for (const a of [Tokens, Callback, Keys]) expect(fold(a, removed)).toEqual({ exists: false, title: "b", removedBy: "admin" });
    expect(Object.keys(Tokens.evolve)).toEqual(Object.keys(Keys.evolve));
    expect(Object.isFrozen(Tokens.evolve)).toBe(true);
  });

  it("refuses a step that is not on(token, fn), a second step for one event, and a token of another domain object of the same name", () => {
    const { Todo, TodoCreated } = todoDomains();
    const opts = (evolve: unknown) => ({ initialState: () => 0, evolve }) as never;
    expect(codeOf(() => Todo.aggregate("NotAStep", opts([(n: number) => n])))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => Todo.aggregate("NoToken", opts([on(undefined as never, (n: number) => n)])))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => Todo.aggregate("Command", opts([on(Todo.command("Create") as never, (n: number) => n)])))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => Todo.aggregate("NoFn", opts([on(TodoCreated, "x" as never)])))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => Todo.aggregate("Twice", opts([on(TodoCreated, (n: number) => n), on(TodoCreated, (n: number) => n + 1)])))).toBe(
      "INVALID_DOMAIN",
    );
    expect(codeOf(() => Todo.aggregate("Nothing", opts(undefined)))).toBe("INVALID_DOMAIN");
    expect(
      codeOf(() =>
        Todo.aggregate(
          "BadFn",
          opts(() => 5),
        ),
      ),
    ).toBe("INVALID_DOMAIN");
    const Twin = defineDomain("Todo");
    const TwinCreated = Twin.event<TodoCreated>("TodoCreated");
    let error: unknown;
    try {
      Todo.aggregate("Twin", opts([on(TwinCreated, (n: number) => n)]));
    } catch (e) {
      error = e;
    }
    expect(isMnemeError(error, "INVALID_DOMAIN")).toBe(true);
    expect((error as Error).message).toContain("another domain object named Todo");
    expect([...Todo.aggregates.keys()]).toEqual([]);
  });

  it("registration and start check the steps' events as they check object keys", async () => {
    const Source = defineDomain("Source");
    const Pinged = Source.event<{ n: number }>("Pinged");
    const Counter = defineDomain("Counter");
    Counter.aggregate<number>("Counter", { initialState: () => 0, evolve: [on(Pinged, (n, p) => n + p.n)] });
    const ok = createFacade().registerDomain(Counter).registerDomain(Source);
    await ok.start();
    await ok.stop();
    // The token's domain is never registered: start refuses, as for a key "Source.Pinged".
    const lonely = createFacade().registerDomain(Counter);
    await expect(lonely.start()).rejects.toMatchObject({ code: "INVALID_DOMAIN" });
  });

  it("loads an aggregate through the facade with the token form", async () => {
    const Bank = defineDomain("Bank");
    const Deposited = Bank.event<{ amount: number }>("Deposited");
    const Deposit = Bank.command<{ accountUuid: string; amount: number }>("Deposit");
    const Account = Bank.aggregate("Account", {
      initialState: () => ({ balance: 0 }),
      evolve: (on) => [on(Deposited, (s, p) => ({ balance: s.balance + p.amount }))],
    });
    Bank.handleCommand(Deposit, async (ctx, _c, p) => {
      await ctx.aggregates.load(Account, p.accountUuid);
      return [Deposited.create(p.accountUuid, { amount: p.amount })];
    });
    const f = createFacade().registerDomain(Bank);
    await f.start();
    try {
      const reqCtx = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t" };
      const accountUuid = newUuid();
      await f.dispatch(Deposit, { accountUuid, amount: 5 }, { reqCtx });
      await f.dispatch(Deposit, { accountUuid, amount: 7 }, { reqCtx });
      const loaded = await f.loadAggregate(Account, accountUuid, { tenantUuid: "t" });
      expect(loaded.state).toEqual({ balance: 12 });
    } finally {
      await f.stop();
    }
  });
});
