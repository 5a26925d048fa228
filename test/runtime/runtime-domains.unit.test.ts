/**
 * One way to define a domain: a definition plus an install step. The install
 * step (facade.registerDomain(definition, install)) attaches handlers per
 * facade, so one definition serves several facades with different
 * parameters; the Runtime domain is such a definition, its tokens exported
 * from `mneme` and typed by payload and result.
 */
import { afterEach, describe, expect, expectTypeOf, it } from "vitest";
import {
  type DomainInstaller,
  type Facade,
  type JsonSchema,
  createFacade,
  defineDomain,
  newPermissionCmdFunc,
  registerStorePermissions,
} from "mneme";
import type { StoreInfo as StoreInfoT } from "mneme/store";
import {
  type CommandListEntry,
  type PermissionListEntry,
  ControlEventHandler,
  StoreInfo,
  GetSchema,
  GetSystemInfo,
  ListCommandHandlers,
  ListCommands,
  ListPermissions,
  ListQueries,
  RuntimeDomain,
  type EventHandlerInfo,
  type SystemInfo,
} from "mneme/runtime";
import { ADMIN, USER, authorizer } from "./runtime-fixture.js";

/** The code of the MnemeError `fn` throws. */
function codeOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return (e as { code?: unknown }).code;
  }
  return "no error";
}

const facades: Facade[] = [];
afterEach(async () => {
  for (const f of facades.splice(0)) await f.stop();
});

async function started(install: (f: Facade) => void = () => undefined): Promise<Facade> {
  const f = createFacade({ authorizer });
  facades.push(f);
  install(f);
  await f.start();
  return f;
}

/** A definition with no handler of its own: its install step takes a greeting. */
function greeter() {
  const Greeter = defineDomain("Greeter");
  const Greet = Greeter.command<{ name: string }, { text: string }>("Greet");
  const Greeted = Greeter.event<{ text: string }>("Greeted");
  const LastGreeting = Greeter.query<Record<string, never>, string>("LastGreeting");
  const install = (d: DomainInstaller, greeting: string) => {
    let last = "";
    d.handleCommand(Greet, (_ctx, _c, p) => {
      last = `${greeting}, ${p.name}`;
      return { events: [Greeted.create("g", { text: last })], result: { text: last } };
    });
    d.handleQuery(LastGreeting, () => last);
  };
  return { Greeter, Greet, LastGreeting, install };
}

describe("the install step", () => {
  it("installs one definition in two facades, each with its own parameters and handlers; the definition is not changed", async () => {
    const { Greeter, Greet, LastGreeting, install } = greeter();
    const a = await started((f) => f.registerDomain(Greeter, (d) => install(d, "Hello")));
    const b = await started((f) => f.registerDomain(Greeter, (d) => install(d, "Hej")));
    const ra = await a.dispatch(Greet, { name: "Ada" }, { reqCtx: USER });
    expectTypeOf(ra.result).toEqualTypeOf<{ text: string } | undefined>();
    expect(ra.result).toEqual({ text: "Hello, Ada" });
    expect((await b.dispatch(Greet, { name: "Bo" }, { reqCtx: USER })).result).toEqual({ text: "Hej, Bo" });
    expect(await a.query(LastGreeting, {}, { reqCtx: USER })).toBe("Hello, Ada");
    expect(await b.query(LastGreeting, {}, { reqCtx: USER })).toBe("Hej, Bo");
    expect(Greeter.commandHandlers.size + Greeter.queryHandlers.size).toBe(0);
    expect(a.domains.get("Greeter")?.definition).toBe(Greeter);
    expect(a.runtime.listCommandHandlers()).toContainEqual({
      commandHandlerDomain: "Greeter",
      domainCommandHandlers: [{ domainCmdName: "Greet" }],
    });
    expect(a.runtime.systemInfo().counts).toMatchObject({ commandHandlers: expect.any(Number), queryHandlers: expect.any(Number) });
  });

  it("adds to the handlers attached to the definition; a type of another domain or a second handler is INVALID_DOMAIN", () => {
    const D = defineDomain("D");
    const Do = D.command("Do");
    const Ask = D.query<Record<string, never>, number>("Ask");
    const Other = defineDomain("Other").command("Do");
    D.handleCommand(Do, () => undefined);
    const f = createFacade();
    expect(codeOf(() => f.registerDomain(D, (d) => d.handleCommand(Do, () => undefined)))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => f.registerDomain(D, (d) => d.handleCommand(Other, () => undefined)))).toBe("INVALID_DOMAIN");
    expect(
      codeOf(() =>
        f.registerDomain(D, (d) => {
          d.handleQuery(Ask, () => 1);
          d.handleQuery(Ask, () => 2);
        }),
      ),
    ).toBe("INVALID_DOMAIN");
    // Nothing of a failed install is left behind; the same definition installs afterwards.
    expect(f.domains.has("D")).toBe(false);
    expect(f.permissions.get("D", "Do")).toBeUndefined();
    f.registerDomain(D, (d) => d.handleQuery(Ask, () => 3));
    expect([...f.domains.get("D")!.commandHandlers.keys()]).toEqual(["Do"]);
    expect([...f.domains.get("D")!.queryHandlers.keys()]).toEqual(["Ask"]);
  });

  it("is closed once the install function returns (INVALID_STATE)", () => {
    const D = defineDomain("D");
    const Do = D.command("Do");
    let kept: DomainInstaller | undefined;
    createFacade().registerDomain(D, (d) => {
      kept = d;
    });
    expect(codeOf(() => kept!.handleCommand(Do, () => undefined))).toBe("INVALID_STATE");
  });

  it("registerPermission replaces a permission in this facade only", async () => {
    const D = defineDomain("D");
    const Ask = D.query<Record<string, never>, string>("Ask");
    D.handleQuery(Ask, () => "yes");
    const open = await started((f) => f.registerDomain(D, (d) => d.registerPermission(newPermissionCmdFunc("D", "Ask", () => undefined))));
    const plain = await started((f) => f.registerDomain(D));
    expect(await open.query(Ask, {}, { reqCtx: {} })).toBe("yes");
    await expect(plain.query(Ask, {}, { reqCtx: {} })).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
    expect(D.permissions.get("Ask")?.kind).toBe("level");
    expect(
      codeOf(() => createFacade().registerDomain(D, (d) => d.registerPermission(newPermissionCmdFunc("D", "Missing", () => undefined)))),
    ).toBe("INVALID_PERMISSION");
  });
});

describe("the Runtime domain", () => {
  it("is one module-level definition whose handlers each facade installs with its own Runtime", async () => {
    expect(RuntimeDomain.name).toBe("Runtime");
    expect(RuntimeDomain.commandHandlers.size + RuntimeDomain.queryHandlers.size).toBe(0);
    const { Greeter, install } = greeter();
    const a = await started((f) => f.registerDomain(Greeter, (d) => install(d, "Hi")));
    const b = await started();
    expect(a.domains.get("Runtime")?.definition).toBe(RuntimeDomain);
    const inA = await a.query(ListCommands, {}, { reqCtx: USER });
    const inB = await b.query(ListCommands, {}, { reqCtx: USER });
    expect(inA.some((c) => c.domain === "Greeter")).toBe(true);
    expect(inB.some((c) => c.domain === "Greeter")).toBe(false);
  });

  it("exports its tokens typed by payload and result", async () => {
    const f = await started((x) => registerStorePermissions(x));
    const commands = await f.query(ListCommands, {}, { reqCtx: USER });
    expectTypeOf(commands).toEqualTypeOf<CommandListEntry[]>();
    expect(commands.map((c) => c.domainCmdName)).toContain("ControlEventHandler");
    expectTypeOf(await f.query(GetSystemInfo, {}, { reqCtx: USER })).toEqualTypeOf<SystemInfo>();
    expectTypeOf(await f.query(GetSchema, { domain: "Runtime", type: "ListCommands" }, { reqCtx: USER })).toEqualTypeOf<JsonSchema>();
    const perms = await f.query(ListPermissions, { domain: "Runtime" }, { reqCtx: USER });
    expectTypeOf(perms).toEqualTypeOf<PermissionListEntry[]>();
    expect(perms.every((p) => !("cmdFunc" in p))).toBe(true);
    const handlers = await f.query(ListCommandHandlers, {}, { reqCtx: USER });
    expect(
      handlers
        .find((h) => h.commandHandlerDomain === "Runtime")
        ?.domainCommandHandlers.map((h) => h.domainCmdName)
        .sort(),
    ).toEqual([
      "ApplyRetention",
      "CancelScheduledCommand",
      "ControlDeadLetter",
      "ControlEventHandler",
      "FinishRollingUpgrade",
      "ForgetSubject",
      "MigratePersonalData",
      "StoreDelete",
      "StoreUpdate",
    ]);
    const info = await f.query(StoreInfo, { store: "event" }, { reqCtx: ADMIN });
    expectTypeOf(info).toEqualTypeOf<StoreInfoT>();
    expect(info.storeType).toBe("memory");
    expectTypeOf(ControlEventHandler).toExtend<{ readonly __result?: EventHandlerInfo }>();
    // @ts-expect-error: a store is one of the five store names
    await expect(f.query(StoreInfo, { store: "nope" }, { reqCtx: ADMIN })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    const queries = await f.query(ListQueries, {}, { reqCtx: USER });
    expect(queries.find((q) => q.domainQryName === "StoreInfo")?.permission).toBe("Custom");
  });
});
