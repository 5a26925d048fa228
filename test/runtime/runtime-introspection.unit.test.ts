/**
 * Runtime introspection (lists, permissions, metrics, systemInfo, getSchema)
 * against domains registered in the test, both as direct calls and as queries
 * of the Runtime domain through facade.query, with their permission checks.
 */
import { hostname } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { type Facade, type JsonSchema, type RequestContext, createFacade, defineDomain, registerStorePermissions } from "mneme";
import { ADMIN, USER, OrderList, makeDomains, type Rig, startRig } from "./runtime-fixture.js";
import { rejection } from "../support/rejections.js";

const S2020 = "https://json-schema.org/draft/2020-12/schema";
let rig: Rig | undefined;
const extra: Facade[] = [];

afterEach(async () => {
  await rig?.facade.stop();
  rig = undefined;
  for (const f of extra.splice(0)) await f.stop();
});

const q = (f: Facade, name: string, payload: object = {}, reqCtx: RequestContext = USER) =>
  f.query({ domain: "Runtime", name }, payload, { reqCtx });

describe("lists", () => {
  it("listCommands shows every command of the registered domains with its permission name", async () => {
    rig = await startRig();
    const cmds = rig.facade.runtime.listCommands();
    const shop = cmds.filter((c) => c.domain !== "Runtime");
    expect(shop).toEqual([
      { domain: "Shop", domainCmdName: "PlaceOrder", description: "Place an order", permission: "Authorized" },
      { domain: "Shop", domainCmdName: "CancelOrder", description: "Cancel an order", permission: "Custom" },
      { domain: "Shop", domainCmdName: "Archive", description: "A command without a handler", permission: "Authorized" },
      { domain: "Billing", domainCmdName: "Invoice", description: "Invoice an order", permission: "Authorized" },
    ]);
    const runtime = Object.fromEntries(cmds.filter((c) => c.domain === "Runtime").map((c) => [c.domainCmdName, c.permission]));
    expect(runtime).toEqual({
      ControlEventHandler: "Administrator",
      CancelScheduledCommand: "Administrator",
      ControlDeadLetter: "Administrator",
      MigratePersonalData: "Administrator",
      FinishRollingUpgrade: "Administrator",
      ForgetSubject: "Custom",
      ApplyRetention: "Administrator",
      StoreUpdate: "Custom",
      StoreDelete: "Custom",
    });
  });

  it("listQueries shows levels, custom functions and administrator-only queries", async () => {
    rig = await startRig();
    const byName = new Map(rig.facade.runtime.listQueries().map((x) => [`${x.domain}.${x.domainQryName}`, x]));
    expect(byName.get("Shop.Ping")).toEqual({ domain: "Shop", domainQryName: "Ping", description: "Liveness", permission: "Anonymous" });
    expect(byName.get("Shop.CountOrders")?.permission).toBe("Authorized");
    expect(byName.get("Runtime.ListCommands")?.permission).toBe("Authorized");
    expect(byName.get("Runtime.StreamSystemEvents")?.permission).toBe("Administrator");
    expect(byName.get("Runtime.StoreRead")?.permission).toBe("Custom");
    expect(byName.get("Runtime.GetClearPersonalData")?.permission).toBe("Administrator");
    expect([...byName.keys()].filter((k) => k.startsWith("Runtime.")).sort()).toEqual([
      "Runtime.GetClearPersonalData",
      "Runtime.GetMetrics",
      "Runtime.GetSchema",
      "Runtime.GetSystemInfo",
      "Runtime.ListCommandHandlers",
      "Runtime.ListCommands",
      "Runtime.ListDeadLetters",
      "Runtime.ListEventHandlers",
      "Runtime.ListEvents",
      "Runtime.ListFailures",
      "Runtime.ListPermissions",
      "Runtime.ListQueries",
      "Runtime.ListQueryHandlers",
      "Runtime.ListScheduledCommands",
      "Runtime.StoreInfo",
      "Runtime.StoreRead",
      "Runtime.StreamSystemEvents",
      "Runtime.SubscribeEvents",
    ]);
  });

  it("listEvents gives name and path of every domain event", async () => {
    rig = await startRig();
    expect(
      rig.facade.runtime.listEvents().map(({ domain, domainEvtName, domainEvtPath }) => ({ domain, domainEvtName, domainEvtPath })),
    ).toEqual([
      { domain: "Shop", domainEvtName: "OrderPlaced", domainEvtPath: "Shop.OrderPlaced" },
      { domain: "Shop", domainEvtName: "OrderCancelled", domainEvtPath: "Shop.OrderCancelled" },
      { domain: "Billing", domainEvtName: "Invoiced", domainEvtPath: "Billing.Invoiced" },
    ]);
  });

  it("listCommandHandlers and listQueryHandlers group handlers by domain and leave out commands without one", async () => {
    rig = await startRig();
    const cmd = rig.facade.runtime.listCommandHandlers();
    expect(cmd.find((g) => g.commandHandlerDomain === "Shop")).toEqual({
      commandHandlerDomain: "Shop",
      domainCommandHandlers: [{ domainCmdName: "PlaceOrder" }, { domainCmdName: "CancelOrder" }],
    });
    expect(cmd.find((g) => g.commandHandlerDomain === "Billing")).toEqual({
      commandHandlerDomain: "Billing",
      domainCommandHandlers: [{ domainCmdName: "Invoice" }],
    });
    expect(
      cmd
        .find((g) => g.commandHandlerDomain === "Runtime")
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
    const qry = rig.facade.runtime.listQueryHandlers();
    expect(qry.find((g) => g.queryHandlerDomain === "Shop")).toEqual({
      queryHandlerDomain: "Shop",
      domainQueryHandlers: [{ domainQryName: "Ping" }, { domainQryName: "CountOrders" }],
    });
    // Billing has no query handler: no empty group. StreamSystemEvents is a permission only (no handler).
    expect(qry.some((g) => g.queryHandlerDomain === "Billing")).toBe(false);
    const runtimeQ = qry.find((g) => g.queryHandlerDomain === "Runtime")!.domainQueryHandlers.map((h) => h.domainQryName);
    expect(runtimeQ).not.toContain("StreamSystemEvents");
    expect(runtimeQ).toHaveLength(16);
  });

  it("listEventHandlers reports state, restoration, events, last position and timestamp, and metrics", async () => {
    rig = await startRig();
    await rig.place("o1");
    await rig.place("o2");
    await rig.facade.dispatch(
      { domain: "Shop", name: "CancelOrder" },
      { orderUuid: "o1", reason: "changed mind" },
      { reqCtx: USER, waitToFinish: true },
    );
    const placed2 = (await collect(rig.facade)).find((e) => e.position === 2);
    const list = rig.facade.runtime.listEventHandlers();
    expect(list).toHaveLength(2);
    const orders = list.find((h) => h.eventHandlerName === "OrderList")!;
    expect(orders).toMatchObject({
      eventHandlerName: "OrderList",
      domain: "Shop",
      name: "OrderList",
      state: "running",
      restorationState: "restored",
      domainEvents: ["Shop.OrderPlaced"],
      hasMetrics: true,
    });
    // The cancel (position 3) is not an OrderList event, but it moves the handler past it.
    expect(orders.lastPosition).toBe(3);
    expect(orders.lastEventTimestamp).toBeGreaterThanOrEqual(placed2!.createdAt);
    const mailer = list.find((h) => h.eventHandlerName === "Mailer")!;
    expect(mailer).toMatchObject({
      domain: "Shop",
      state: "running",
      restorationState: "idle",
      domainEvents: ["*"],
      lastPosition: 3,
      hasMetrics: false,
    });
    const all = await collect(rig.facade);
    expect(mailer.lastEventTimestamp).toBe(all[2]!.createdAt);
  });

  it("permissions.list shows every command and query permission, and the 20 store permissions once registered", async () => {
    rig = await startRig();
    const f = rig.facade;
    expect(f.runtime.permissions.list({ domain: "Shop" }).map((p) => [p.type, p.funcSet, p.level])).toEqual([
      ["PlaceOrder", false, "Authorized"],
      ["CancelOrder", true, undefined],
      ["Archive", false, "Authorized"],
      ["Ping", false, "Anonymous"],
      ["CountOrders", false, "Authorized"],
    ]);
    const before = f.runtime.permissions.list({ domain: "Runtime" }).length;
    expect(registerStorePermissions(f)).toHaveLength(20);
    expect(registerStorePermissions(f)).toHaveLength(20); // idempotent
    const store = f.runtime.permissions.list({ domain: "Runtime" }).filter((p) => p.type.startsWith("Store") && p.type.includes("."));
    expect(store.map((p) => p.type)).toContain("StoreEvent.Read");
    expect(store).toHaveLength(20);
    expect(store.every((p) => !p.funcSet && p.level === undefined)).toBe(true);
    expect(f.runtime.permissions.list({ domain: "Runtime" })).toHaveLength(before + 20);
    // Through the query: the functions are not part of the answer.
    const listed = (await q(f, "ListPermissions", { domain: "Shop" })) as Record<string, unknown>[];
    expect(listed.map((p) => p.type)).toEqual(["PlaceOrder", "CancelOrder", "Archive", "Ping", "CountOrders"]);
    expect(listed.every((p) => !("cmdFunc" in p))).toBe(true);
    expect(JSON.parse(JSON.stringify(listed))).toEqual(listed);
  });
});

async function collect(f: Facade) {
  const out = [];
  for await (const batch of f.eventRepository.readAll()) out.push(...batch);
  return out;
}

describe("monitoring", () => {
  it("getMetrics covers state restorers only: a record without a name, one handler's metrics with it", async () => {
    rig = await startRig();
    await rig.place("o1");
    await rig.place("o2");
    const all = rig.facade.runtime.getMetrics();
    expect(Object.keys(all)).toEqual(["OrderList"]);
    const m = rig.facade.runtime.getMetrics("OrderList");
    expect(m).toMatchObject({ eventsProcessed: 2, eventsFailed: 0, lastPosition: 2, lag: 0 });
    expect(m.meanHandleMicros).toBeGreaterThan(0);
    expect(m.lastRestore).toMatchObject({ eventsReplayed: 0, afterPosition: 0, toPosition: 0 });
    expect((await rejection(() => rig!.facade.runtime.getMetrics("Mailer"))).code).toBe("NOT_FOUND");
    expect((await rejection(() => rig!.facade.runtime.getMetrics("Nope"))).code).toBe("UNKNOWN_EVENT_HANDLER");
    expect(await q(rig.facade, "GetMetrics", { eventHandlerName: "OrderList" })).toEqual(rig.facade.runtime.getMetrics("OrderList"));
    expect(await q(rig.facade, "GetMetrics")).toEqual(rig.facade.runtime.getMetrics());
  });

  it("systemInfo names the app and counts what the test registered", async () => {
    const bare = createFacade();
    extra.push(bare);
    const base = bare.runtime.systemInfo().counts;
    expect(base.domains).toBe(1); // the Runtime domain alone
    rig = await startRig({ instanceId: "inst-1", tenant: "tenant-a" });
    const t0 = Date.now() * 1e6;
    const info = rig.facade.runtime.systemInfo();
    expect(info).toMatchObject({
      appName: "shop",
      version: "1.2.3",
      instanceId: "inst-1",
      tenant: "tenant-a",
      nodeVersion: process.version,
      host: hostname(),
      pid: process.pid,
      state: "started",
    });
    expect(info.domains).toEqual([...rig.facade.domains.keys()]);
    expect(info.domains).toContain("Runtime");
    expect(info.domains).not.toContain("Shards");
    expect(info.startedAt).toBeGreaterThan(0);
    expect(info.startedAt).toBeLessThanOrEqual(t0 + 1e9);
    expect(info.uptimeMs).toBeGreaterThanOrEqual(0);
    expect(info.stores).toEqual({
      event: "memory",
      command: "memory",
      data: "memory",
      cache: "memory",
      log: "memory",
      readmodel: "memory",
    });
    expect(info.counts).toEqual({
      domains: base.domains + 2,
      commands: base.commands + 4,
      queries: base.queries + 2,
      events: base.events + 3,
      commandHandlers: base.commandHandlers + 3,
      queryHandlers: base.queryHandlers + 2,
      eventHandlers: 2,
      permissions: base.permissions + 6,
    });
    expect(info.counts.commands).toBe(rig.facade.runtime.listCommands().length);
    expect(info.counts.queries).toBe(rig.facade.runtime.listQueries().length);
    expect(info.counts.events).toBe(rig.facade.runtime.listEvents().length);
    expect(await q(rig.facade, "GetSystemInfo")).toMatchObject({ appName: "shop", instanceId: "inst-1", counts: info.counts });
    // The head of the events' hash chain: the highest position and its hash (see docs/operations.md).
    const withChain = (await q(rig.facade, "GetSystemInfo")) as { eventChain: { position: number; hash: string }; headPosition: number };
    expect(withChain.eventChain.position).toBe(withChain.headPosition);
    expect(withChain.eventChain.hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it("systemInfo has no tenant when none is configured, and no start time before start", () => {
    const f = createFacade({ appName: "x" });
    extra.push(f);
    const info = f.runtime.systemInfo();
    expect("tenant" in info).toBe(false);
    expect(info).toMatchObject({ startedAt: 0, uptimeMs: 0, state: "new" });
  });
});

describe("through facade.query, permission-checked", () => {
  const lists = ["ListCommands", "ListQueries", "ListEvents", "ListCommandHandlers", "ListQueryHandlers", "ListEventHandlers"] as const;
  const direct = {
    ListCommands: "listCommands",
    ListQueries: "listQueries",
    ListEvents: "listEvents",
    ListCommandHandlers: "listCommandHandlers",
    ListQueryHandlers: "listQueryHandlers",
    ListEventHandlers: "listEventHandlers",
  } as const;

  it("each list answers an authorized sender exactly as the direct call", async () => {
    rig = await startRig();
    await rig.place("o1");
    for (const name of lists) {
      expect(await q(rig.facade, name), name).toEqual((rig.facade.runtime[direct[name]] as () => unknown).call(rig.facade.runtime));
    }
  });

  it("lists need `authorized`: anonymous and merely authenticated senders are denied", async () => {
    rig = await startRig();
    const authenticatedOnly = { senderAccountUuid: "a", senderSessionUuid: "s" };
    for (const name of [...lists, "ListPermissions", "GetMetrics", "GetSystemInfo", "GetSchema"]) {
      const payload = name === "GetSchema" ? { domain: "Shop", type: "PlaceOrder" } : {};
      expect((await rejection(q(rig.facade, name, payload, {}))).code, name).toBe("PERMISSION_DENIED");
      expect((await rejection(q(rig.facade, name, payload, authenticatedOnly))).code, name).toBe("PERMISSION_DENIED");
    }
  });

  it("the authorizer is consulted after the level: it can deny a list", async () => {
    const f = createFacade({
      authorizer: (ctx, p) =>
        p.type === "ListCommands" && ctx.senderAccountUuid !== ADMIN.senderAccountUuid ? new Error("admins only") : undefined,
    });
    extra.push(f);
    await f.start();
    expect((await rejection(q(f, "ListCommands", {}, USER))).code).toBe("PERMISSION_DENIED");
    expect(await q(f, "ListCommands", {}, ADMIN)).toEqual(f.runtime.listCommands());
    expect(await q(f, "ListQueries", {}, USER)).toEqual(f.runtime.listQueries());
  });

  it("ControlEventHandler and StreamSystemEvents are granted by the authorizer alone", async () => {
    rig = await startRig();
    const f = rig.facade;
    const control = { action: "stop", eventHandlerName: "Mailer" };
    expect((await rejection(f.dispatch({ domain: "Runtime", name: "ControlEventHandler" }, control, { reqCtx: USER }))).code).toBe(
      "PERMISSION_DENIED",
    );
    expect(f.runtime.listEventHandlers().find((h) => h.name === "Mailer")?.state).toBe("running");
    const res = await f.dispatch({ domain: "Runtime", name: "ControlEventHandler" }, control, { reqCtx: ADMIN });
    expect(res.result).toMatchObject({ eventHandlerName: "Mailer", state: "stopped" });
    const env = (reqCtx: RequestContext) => ({ queryUuid: "q", domain: "Runtime", name: "StreamSystemEvents", payload: {}, reqCtx });
    await expect(f.permissions.check(USER, env(USER))).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
    await expect(f.permissions.check(ADMIN, env(ADMIN))).resolves.toBeUndefined();
    expect((await rejection(q(f, "StreamSystemEvents", {}, USER))).code).toBe("PERMISSION_DENIED");
    // It is a permission for the SSE route, not an answerable query: an administrator passes the check and finds no handler.
    expect((await rejection(q(f, "StreamSystemEvents", {}, ADMIN))).code).toBe("UNKNOWN_QUERY");

    // Without an authorizer nobody gets them, however complete the context.
    const none = createFacade();
    extra.push(none);
    none.registerReadmodel(new OrderList(none, makeDomains().OrderPlaced));
    await none.start();
    const denied = await rejection(
      none.dispatch(
        { domain: "Runtime", name: "ControlEventHandler" },
        { action: "stop", eventHandlerName: "OrderList" },
        { reqCtx: ADMIN },
      ),
    );
    expect(denied.code).toBe("PERMISSION_DENIED");
    await expect(none.permissions.check(ADMIN, env(ADMIN))).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
  });

  it("store operations through query/dispatch are checked against the store permission", async () => {
    rig = await startRig();
    const f = rig.facade;
    expect((await rejection(q(f, "StoreInfo", { store: "log" }, ADMIN))).code).toBe("STORE_PERMISSIONS_NOT_REGISTERED");
    registerStorePermissions(f);
    expect((await rejection(q(f, "StoreInfo", { store: "log" }, USER))).code).toBe("PERMISSION_DENIED");
    expect(await q(f, "StoreInfo", { store: "log" }, ADMIN)).toMatchObject({ storeType: "memory" });
    expect(
      (await rejection(f.dispatch({ domain: "Runtime", name: "StoreUpdate" }, { store: "data", key: "k", value: "v" }, { reqCtx: USER })))
        .code,
    ).toBe("PERMISSION_DENIED");
    const r = await f.dispatch({ domain: "Runtime", name: "StoreUpdate" }, { store: "data", key: "k", value: "v" }, { reqCtx: ADMIN });
    expect(r.result).toEqual({ key: "k" });
    expect(await q(f, "StoreRead", { store: "data" }, ADMIN)).toMatchObject({ items: [{ key: "k", size: 1 }] });
    const d = await f.dispatch({ domain: "Runtime", name: "StoreDelete" }, { store: "data", key: "k" }, { reqCtx: ADMIN });
    expect(d.result).toEqual({ deleted: true });
  });
});

describe("getSchema and validation", () => {
  const hand: JsonSchema = {
    $schema: S2020,
    $defs: {
      Uuid: { type: "string", format: "uuid" },
      Invoice: {
        type: "object",
        properties: { orderUuid: { $ref: "#/$defs/Uuid" }, note: { type: "string" } },
        required: ["orderUuid"],
        additionalProperties: false,
      },
      // An explicit `schema` on the type wins over $defs of the same name.
      PlaceOrder: { type: "object", properties: { wrong: { type: "number" } } },
    },
  };

  it("serves a type's explicit schema, inlined, with $schema", async () => {
    rig = await startRig({ schemas: hand });
    const doc = rig.facade.runtime.getSchema({ domain: "Shop", type: "PlaceOrder" });
    expect(doc).toEqual({
      $schema: S2020,
      type: "object",
      additionalProperties: false,
      required: ["orderUuid", "item", "qty"],
      properties: {
        orderUuid: { type: "string", minLength: 1 },
        item: { type: "string", minLength: 1 },
        qty: { type: "integer", minimum: 1 },
      },
    });
    expect(await q(rig.facade, "GetSchema", { domain: "Shop", type: "PlaceOrder" })).toEqual(doc);
  });

  it("serves $defs[type] of createFacade({ schemas }) with the $defs it references and a type on every property", async () => {
    rig = await startRig({ schemas: hand });
    const doc = rig.facade.runtime.getSchema({ domain: "Billing", type: "Invoice" });
    expect(doc.$schema).toBe(S2020);
    expect(doc.type).toBe("object");
    expect(doc.required).toEqual(["orderUuid"]);
    const props = doc.properties as Record<string, Record<string, unknown>>;
    expect(props.orderUuid).toMatchObject({ type: "string", format: "uuid" });
    expect(props.note).toEqual({ type: "string" });
    expect(doc.$defs).toEqual({ Uuid: { type: "string", format: "uuid" } });
    // The Runtime domain ships its own schemas.
    const ctl = rig.facade.runtime.getSchema({ domain: "Runtime", type: "ControlEventHandler" });
    expect((ctl.properties as Record<string, unknown>).action).toMatchObject({ examples: ["restore", "start", "stop"] });
    expect(ctl.required).toEqual(["eventHandlerName"]);
  });

  it("UNKNOWN_SCHEMA_TYPE for an unknown domain, an unknown type, or a type without a schema; INVALID_REQUEST for a bad request", async () => {
    rig = await startRig({ schemas: hand });
    const rt = rig.facade.runtime;
    expect((await rejection(() => rt.getSchema({ domain: "Nope", type: "PlaceOrder" }))).code).toBe("UNKNOWN_SCHEMA_TYPE");
    expect((await rejection(() => rt.getSchema({ domain: "Shop", type: "Nope" }))).code).toBe("UNKNOWN_SCHEMA_TYPE");
    expect((await rejection(() => rt.getSchema({ domain: "Shop", type: "Archive" }))).code).toBe("UNKNOWN_SCHEMA_TYPE");
    expect((await rejection(() => rt.getSchema({ domain: "", type: "x" }))).code).toBe("INVALID_REQUEST");
    expect((await rejection(q(rig.facade, "GetSchema", { domain: "Shop", type: "Nope" }))).code).toBe("UNKNOWN_SCHEMA_TYPE");
  });

  it("dispatch rejects an invalid payload with VALIDATION_FAILED and a JSON pointer per failure, writing nothing", async () => {
    rig = await startRig({ schemas: hand });
    const f = rig.facade;
    const err = await rejection(
      f.dispatch({ domain: "Shop", name: "PlaceOrder" }, { orderUuid: "", qty: 0, extra: true }, { reqCtx: USER }),
    );
    expect(err.code).toBe("VALIDATION_FAILED");
    expect(err.details?.map((d) => d.pointer).sort()).toEqual(["/extra", "/item", "/orderUuid", "/qty"]);
    // $defs-based schema with a format, and a nested pointer through the $ref'd property.
    const inv = await rejection(f.dispatch({ domain: "Billing", name: "Invoice" }, { orderUuid: "not-a-uuid", note: 5 }, { reqCtx: USER }));
    expect(inv.code).toBe("VALIDATION_FAILED");
    expect(inv.details?.map((d) => d.pointer).sort()).toEqual(["/note", "/orderUuid"]);
    expect(await f.eventRepository.headPosition()).toBe(0);
    await f.dispatch({ domain: "Billing", name: "Invoice" }, { orderUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ab" }, { reqCtx: USER });
  });

  it("Runtime queries and commands validate too: VALIDATION_FAILED with pointers", async () => {
    rig = await startRig();
    const f = rig.facade;
    const a = await rejection(q(f, "GetSchema", { domain: 5 }));
    expect(a.code).toBe("VALIDATION_FAILED");
    expect(a.details?.map((d) => d.pointer).sort()).toEqual(["/domain", "/type"]);
    const b = await rejection(q(f, "ListCommands", { verbose: true }));
    expect(b.details?.map((d) => d.pointer)).toEqual(["/verbose"]);
    const c = await rejection(
      f.dispatch({ domain: "Runtime", name: "ControlEventHandler" }, { action: "stop", eventHandlerName: "" }, { reqCtx: ADMIN }),
    );
    expect(c.code).toBe("VALIDATION_FAILED");
    expect(c.details?.map((d) => d.pointer)).toEqual(["/eventHandlerName"]);
    const d = await rejection(q(f, "StoreRead", { store: "log", limit: 0 }, ADMIN));
    // The store gate runs before validation: before registration the gate answers.
    expect(d.code).toBe("STORE_PERMISSIONS_NOT_REGISTERED");
    registerStorePermissions(f);
    const e = await rejection(q(f, "StoreRead", { store: "log", limit: 0 }, ADMIN));
    expect(e.code).toBe("VALIDATION_FAILED");
    expect(e.details?.map((x) => x.pointer)).toEqual(["/limit"]);
  });

  it("a domain defined in the test gets its schema by name from a schemas file object", async () => {
    const D = defineDomain("Notes");
    const Add = D.command<{ text: string }>("AddNote");
    D.handleCommand(Add, () => []);
    const f = createFacade({
      schemas: {
        $schema: S2020,
        $defs: { AddNote: { type: "object", properties: { text: { type: "string", maxLength: 3 } }, required: ["text"] } },
      },
    });
    extra.push(f);
    f.registerDomain(D);
    await f.start();
    expect(f.runtime.getSchema({ domain: "Notes", type: "AddNote" })).toMatchObject({
      $schema: S2020,
      properties: { text: { type: "string" } },
    });
    const err = await rejection(f.dispatch(Add, { text: "too long" }, { reqCtx: USER }));
    expect(err.details).toEqual([expect.objectContaining({ pointer: "/text" })]);
  });
});
