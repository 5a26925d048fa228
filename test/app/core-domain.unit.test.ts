/**
 * defineDomain (tokens, names, handlers, permissions) and facade.registerDomain
 * (duplicate domains, one runtime permission per command and query).
 */
import { describe, expect, it } from "vitest";
import {
  anonymous,
  authenticated,
  authorized,
  createFacade,
  defineDomain,
  type ErrorCode,
  isMnemeError,
  newPermissionCmdFunc,
} from "mneme";

function codeOf(fn: () => unknown): ErrorCode | "no error" | "not a MnemeError" {
  try {
    fn();
  } catch (e) {
    return isMnemeError(e) ? e.code : "not a MnemeError";
  }
  return "no error";
}

describe("defineDomain tokens", () => {
  it("command, query and event tokens are { kind, domain, name } and frozen", () => {
    const Shop = defineDomain("Shop", { description: "A shop" });
    const PlaceOrder = Shop.command<{ orderUuid: string }>("PlaceOrder", { description: "Place an order" });
    const GetOrder = Shop.query<{ orderUuid: string }, unknown>("GetOrder");
    const OrderPlaced = Shop.event<{ total: number }>("OrderPlaced");

    expect(Shop.name).toBe("Shop");
    expect(Shop.description).toBe("A shop");
    expect(PlaceOrder).toMatchObject({ kind: "command", domain: "Shop", name: "PlaceOrder", description: "Place an order" });
    expect(GetOrder).toMatchObject({ kind: "query", domain: "Shop", name: "GetOrder" });
    expect(OrderPlaced).toMatchObject({ kind: "event", domain: "Shop", name: "OrderPlaced", path: "Shop.OrderPlaced" });
    expect(Object.isFrozen(PlaceOrder)).toBe(true);
    expect(Object.isFrozen(GetOrder)).toBe(true);
    expect(Object.isFrozen(OrderPlaced)).toBe(true);
    expect(Shop.commands.get("PlaceOrder")).toBe(PlaceOrder);
    expect(Shop.queries.get("GetOrder")).toBe(GetOrder);
    expect(Shop.events.get("OrderPlaced")).toBe(OrderPlaced);
  });

  it("EventType.create makes a NewEvent and is() narrows stored events of that type only", () => {
    const Shop = defineDomain("Shop");
    const OrderPlaced = Shop.event<{ total: number }>("OrderPlaced");
    const OrderCancelled = Shop.event<{ reason: string }>("OrderCancelled");
    expect(OrderPlaced.create("o-1", { total: 3 })).toEqual({
      domain: "Shop",
      name: "OrderPlaced",
      aggregateUuid: "o-1",
      payload: { total: 3 },
    });
    expect(OrderPlaced.create("o-1", { total: 3 }, { version: 2, tenantUuid: "t" })).toMatchObject({ version: 2, tenantUuid: "t" });
    const stored = {
      ...OrderPlaced.create("o-1", { total: 3 }),
      eventUuid: "e",
      position: 1,
      tenantUuid: "",
      version: 1,
      createdAt: 1,
      reqCtx: {},
    };
    expect(OrderPlaced.is(stored)).toBe(true);
    expect(OrderCancelled.is(stored)).toBe(false);
  });

  it("an aggregate folds its own events by name and foreign ones by path; unknown events keep the state", () => {
    const Shop = defineDomain("Shop");
    const Other = defineDomain("Other");
    const Added = Shop.event<{ n: number }>("Added");
    const Bonus = Other.event<{ n: number }>("Bonus");
    const Counter = Shop.aggregate<{ total: number }>("Counter", {
      initialState: () => ({ total: 0 }),
      evolve: {
        Added: (s, p: { n: number }) => ({ total: s.total + p.n }),
        "Other.Bonus": (s, p: { n: number }) => ({ total: s.total + 10 * p.n }),
      },
    });
    const ev = (t: { domain: string; name: string }, n: number) => ({
      domain: t.domain,
      name: t.name,
      aggregateUuid: "c",
      payload: { n },
      eventUuid: "e",
      position: 1,
      tenantUuid: "",
      version: 1,
      createdAt: 1,
      reqCtx: {},
    });
    let s = Counter.initialState();
    s = Counter.apply(s, ev(Added, 2));
    s = Counter.apply(s, ev(Bonus, 1));
    s = Counter.apply(s, ev({ domain: "Shop", name: "Unknown" }, 100));
    // "Added" of another domain is not Shop.Added
    s = Counter.apply(s, ev({ domain: "Other", name: "Added" }, 1000));
    expect(s).toEqual({ total: 12 });
  });

  it("rejects duplicate names: commands and queries share one namespace, events and aggregates have their own", () => {
    const D = defineDomain("D");
    D.command("Do");
    expect(codeOf(() => D.command("Do"))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => D.query("Do"))).toBe("INVALID_DOMAIN");
    D.query("Ask");
    expect(codeOf(() => D.command("Ask"))).toBe("INVALID_DOMAIN");
    D.event("Done");
    expect(codeOf(() => D.event("Done"))).toBe("INVALID_DOMAIN");
    D.aggregate("Thing", { initialState: () => ({}), evolve: {} });
    expect(codeOf(() => D.aggregate("Thing", { initialState: () => ({}), evolve: {} }))).toBe("INVALID_DOMAIN");
    // a duplicate does not replace the first definition
    expect(D.commands.size).toBe(1);
    expect(D.queries.size).toBe(1);
  });

  it.each(["", "1abc", "a.b", "a b", "a-b", "Ä", " A", "A\n"])("rejects the invalid name %j everywhere", (bad) => {
    expect(codeOf(() => defineDomain(bad))).toBe("INVALID_DOMAIN");
    const D = defineDomain("D");
    expect(codeOf(() => D.command(bad))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => D.query(bad, {}))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => D.event(bad))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => D.aggregate(bad, { initialState: () => 0, evolve: {} }))).toBe("INVALID_DOMAIN");
    expect(D.commands.size + D.queries.size + D.events.size + D.aggregates.size).toBe(0);
  });

  it("rejects a non-string name and an aggregate without initialState", () => {
    expect(codeOf(() => defineDomain(42 as unknown as string))).toBe("INVALID_DOMAIN");
    const D = defineDomain("D");
    expect(codeOf(() => D.aggregate("A", { evolve: {} } as never))).toBe("INVALID_DOMAIN");
  });

  it("handleCommand / handleQuery reject a type of another domain, a same-named token of another definition, and a second handler", () => {
    const A = defineDomain("A");
    const B = defineDomain("B");
    const DoB = B.command("Do");
    const AskB = B.query("Ask");
    expect(codeOf(() => A.handleCommand(DoB, () => undefined))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => A.handleQuery(AskB, () => undefined))).toBe("INVALID_DOMAIN");
    // another domain object named "B" has its own tokens
    const B2 = defineDomain("B");
    B2.command("Do");
    expect(codeOf(() => B2.handleCommand(DoB, () => undefined))).toBe("INVALID_DOMAIN");
    // a query token is not a command
    expect(codeOf(() => B.handleCommand(AskB as never, () => undefined))).toBe("INVALID_DOMAIN");
    B.handleCommand(DoB, () => undefined);
    expect(codeOf(() => B.handleCommand(DoB, () => undefined))).toBe("INVALID_DOMAIN");
    B.handleQuery(AskB, () => 1);
    expect(codeOf(() => B.handleQuery(AskB, () => 2))).toBe("INVALID_DOMAIN");
    expect(A.commandHandlers.size + A.queryHandlers.size).toBe(0);
  });

  it("registerPermission rejects a permission of another domain or of an undefined command", () => {
    const D = defineDomain("D");
    D.command("Do");
    expect(codeOf(() => D.registerPermission(newPermissionCmdFunc("Other", "Do", () => undefined)))).toBe("INVALID_PERMISSION");
    expect(codeOf(() => D.registerPermission(newPermissionCmdFunc("D", "Missing", () => undefined)))).toBe("INVALID_PERMISSION");
  });
});

describe("facade.registerDomain", () => {
  it("rejects a second domain of the same name (INVALID_DOMAIN), the Runtime's name included", () => {
    const facade = createFacade();
    facade.registerDomain(defineDomain("Shop"));
    expect(codeOf(() => facade.registerDomain(defineDomain("Shop")))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => facade.registerDomain(defineDomain("Runtime")))).toBe("INVALID_DOMAIN");
  });

  it("a rejected domain leaves no permission behind", () => {
    const facade = createFacade();
    const First = defineDomain("Shop");
    First.command("A");
    facade.registerDomain(First);
    const Second = defineDomain("Shop");
    Second.command("B");
    expect(codeOf(() => facade.registerDomain(Second))).toBe("INVALID_DOMAIN");
    expect(facade.permissions.get("Shop", "B")).toBeUndefined();
  });

  it("creates one permission per command and query, default authorized, with the level or the custom function", () => {
    const facade = createFacade();
    const custom = () => undefined;
    const Shop = defineDomain("Shop");
    Shop.command("Default", { description: "default level" });
    Shop.command("Anon", { permission: anonymous });
    Shop.command("Authn", { permission: authenticated });
    Shop.command("Authz", { permission: authorized });
    Shop.command("Custom", { permission: custom });
    Shop.query("QDefault");
    Shop.query("QAnon", { permission: anonymous });
    Shop.query("QCustom", { permission: custom });
    Shop.command("Attached");
    Shop.registerPermission(newPermissionCmdFunc("Shop", "Attached", custom, "attached later"));
    Shop.event("Happened");
    facade.registerDomain(Shop);

    const perms = facade.permissions.list({ domain: "Shop" });
    expect(perms.map((p) => p.type).sort()).toEqual([
      "Anon",
      "Attached",
      "Authn",
      "Authz",
      "Custom",
      "Default",
      "QAnon",
      "QCustom",
      "QDefault",
    ]);
    const get = (t: string) => facade.permissions.get("Shop", t)!;
    expect(get("Default")).toMatchObject({
      domain: "Shop",
      type: "Default",
      description: "default level",
      funcSet: false,
      level: "Authorized",
    });
    expect(get("Anon")).toMatchObject({ kind: "level", funcSet: false, level: "Anonymous" });
    expect(get("Anon").cmdFunc).toBeUndefined(); // cmdFunc is present exactly when funcSet is true
    expect(get("Authn")).toMatchObject({ funcSet: false, level: "Authenticated" });
    expect(get("Authz")).toMatchObject({ funcSet: false, level: "Authorized" });
    expect(get("Custom")).toMatchObject({ kind: "custom", funcSet: true, cmdFunc: custom });
    expect(get("Custom").level).toBeUndefined();
    expect(get("QDefault")).toMatchObject({ funcSet: false, level: "Authorized" });
    expect(get("QAnon")).toMatchObject({ funcSet: false, level: "Anonymous" });
    expect(get("QCustom")).toMatchObject({ funcSet: true, cmdFunc: custom });
    expect(get("Attached")).toMatchObject({ funcSet: true, cmdFunc: custom, description: "attached later" });
    // events get no permission
    expect(facade.permissions.get("Shop", "Happened")).toBeUndefined();
  });

  it("registerPermission with a built-in level keeps it a level (funcSet false)", () => {
    const facade = createFacade();
    const D = defineDomain("D");
    D.command("Do");
    D.registerPermission(newPermissionCmdFunc("D", "Do", anonymous));
    facade.registerDomain(D);
    expect(facade.permissions.get("D", "Do")).toMatchObject({ funcSet: false, level: "Anonymous" });
  });

  it("the Runtime domain is registered with its permissions by the constructor", () => {
    const facade = createFacade();
    expect(facade.domains.has("Runtime")).toBe(true);
    expect(facade.permissions.list({ domain: "Runtime" }).length).toBeGreaterThan(0);
  });
});

describe("evolve keys that name no event", () => {
  it("registration rejects a key of the domain that names no event, listing the known ones", () => {
    const Acc = defineDomain("Acc");
    Acc.event<{ at: number }>("Opened");
    Acc.event<Record<string, never>>("Closed");
    Acc.aggregate<{ open: boolean }>("Account", { initialState: () => ({ open: false }), evolve: { Opend: () => ({ open: true }) } });
    let error: unknown;
    try {
      createFacade().registerDomain(Acc);
    } catch (e) {
      error = e;
    }
    expect(isMnemeError(error, "INVALID_DOMAIN")).toBe(true);
    expect((error as Error).message).toContain('"Opend"');
    expect((error as Error).message).toContain("Opened, Closed");
  });

  it("a key naming another domain's event is checked at start, once every domain is registered", async () => {
    const A = defineDomain("A");
    A.aggregate<number>("Counter", { initialState: () => 0, evolve: { "B.Bumped": (n) => n + 1 } });
    const B = defineDomain("B");
    B.event<Record<string, never>>("Bumped");
    const ok = createFacade().registerDomain(A).registerDomain(B);
    await ok.start();
    await ok.stop();
    const C = defineDomain("C");
    C.aggregate<number>("Counter", { initialState: () => 0, evolve: { "B.Bumpd": (n) => n + 1, "Nowhere.X": (n) => n } });
    const bad = createFacade().registerDomain(C).registerDomain(defineDomain("B"));
    await expect(bad.start()).rejects.toMatchObject({ code: "INVALID_DOMAIN" });
    expect(bad.state).toBe("new");
  });

  it("with the domain's event map, a typo is a type error and payloads are typed", () => {
    interface Opened {
      at: number;
    }
    const Typed = defineDomain<{ Opened: Opened; Closed: { why: string } }>("Typed");
    const Opened = Typed.event("Opened");
    const Closed = Typed.event<{ why: string }>("Closed");
    const Account = Typed.aggregate<{ at: number; why: string }>("Account", {
      initialState: () => ({ at: 0, why: "" }),
      evolve: { Opened: (s, p) => ({ ...s, at: p.at }), Closed: (s, p) => ({ ...s, why: p.why }) },
    });
    Typed.aggregate<number>("Typo", {
      initialState: () => 0,
      // @ts-expect-error "Opend" is not an event of the domain's map (npm run typecheck fails if this compiles)
      evolve: { Opend: (n: number) => n },
    });
    expect(Opened.create("x", { at: 1 }).payload).toEqual({ at: 1 });
    expect(Closed.name).toBe("Closed");
    expect(Object.keys(Account.evolve)).toEqual(["Opened", "Closed"]);
    expect(codeOf(() => createFacade().registerDomain(Typed))).toBe("INVALID_DOMAIN");
  });
});
