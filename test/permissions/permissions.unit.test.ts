/**
 * Permissions: the registry, the built-in levels (exactly the sender fields of
 * each level), custom functions, the authorizer, the check before every command
 * and query, and the 20 store permissions.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  anonymous,
  type Authorizer,
  authenticated,
  authorized,
  type CommandEnvelope,
  createFacade,
  defineDomain,
  type Facade,
  isMnemeError,
  MnemeError,
  newPermission,
  newPermissionCmdFunc,
  type Permission,
  type PermissionFunc,
  registerStorePermissions,
  type RequestContext,
} from "mneme";
import { PermissionRegistry, permissionLevelOf, STORE_ACTIONS, STORE_NAMES } from "mneme/runtime";

const SENDER_FIELDS = ["senderAccountUuid", "senderSessionUuid", "senderIdentityUuid", "senderTenantUuid"] as const;
const full: RequestContext = { senderAccountUuid: "acc", senderSessionUuid: "ses", senderIdentityUuid: "idn", senderTenantUuid: "ten" };

function envelope(domain: string, name: string, reqCtx: RequestContext = {}): CommandEnvelope {
  return { commandUuid: "c-1", domain, name, payload: {}, reqCtx };
}

async function denial(p: Promise<unknown>): Promise<MnemeError | undefined> {
  try {
    await p;
    return undefined;
  } catch (e) {
    if (!isMnemeError(e)) throw e;
    return e;
  }
}

/** Every subset of the four sender fields, as a request context. */
const subsets: [string, RequestContext][] = Array.from({ length: 16 }, (_, mask) => {
  const ctx: RequestContext = {};
  const names: string[] = [];
  SENDER_FIELDS.forEach((f, i) => {
    if (mask & (1 << i)) {
      ctx[f] = `${f}-value`;
      names.push(f);
    }
  });
  return [names.join("+") || "(none)", ctx];
});

describe("PermissionRegistry.register", () => {
  it.each<[string, Partial<Permission>]>([
    ["empty domain", { domain: "" }],
    ["blank domain", { domain: "  " }],
    ["empty type", { type: "" }],
    ["empty description", { description: "" }],
    ["non-string type", { type: 5 as unknown as string }],
    ["missing description", { description: undefined as unknown as string }],
    ["funcSet that is not a boolean", { funcSet: "yes" as unknown as boolean }],
    ["funcSet without cmdFunc", { funcSet: true }],
    ["cmdFunc that is not a function", { cmdFunc: "allow" as unknown as PermissionFunc }],
    ["no kind", { kind: undefined as unknown as "administrator" }],
    ["an unknown kind", { kind: "admin" as unknown as "administrator" }],
  ])("rejects %s with INVALID_PERMISSION and keeps nothing", (_what, patch) => {
    const reg = new PermissionRegistry();
    const p = { kind: "administrator", domain: "D", type: "T", description: "a permission", funcSet: false, ...patch } as Permission;
    expect(() => reg.register(p)).toThrow(expect.objectContaining({ code: "INVALID_PERMISSION" }));
    expect(reg.list()).toEqual([]);
  });

  it("rejects fields that contradict the kind (they would silently change meaning)", () => {
    const reg = new PermissionRegistry();
    const base = { domain: "D", type: "T", description: "d" };
    const contradictions: unknown[] = [
      { ...base, kind: "administrator", funcSet: false, cmdFunc: () => undefined }, // a custom function without funcSet
      { ...base, kind: "administrator", funcSet: false, level: "Anonymous" }, //      a level on an administrator permission
      { ...base, kind: "level", funcSet: false }, //                                  a level permission without its level
      { ...base, kind: "level", funcSet: false, level: "Admin" },
      { ...base, kind: "level", funcSet: false, level: "Anonymous", cmdFunc: () => undefined },
      { ...base, kind: "level", funcSet: true, level: "Anonymous" },
      { ...base, kind: "custom", funcSet: false, cmdFunc: () => undefined },
      { ...base, kind: "custom", funcSet: true, cmdFunc: () => undefined, level: "Authorized" },
      { ...base, funcSet: false }, // the untagged shape of earlier versions
    ];
    for (const p of contradictions) {
      expect(() => reg.register(p as Permission), JSON.stringify(p)).toThrow(expect.objectContaining({ code: "INVALID_PERMISSION" }));
    }
    expect(reg.list()).toEqual([]);
  });

  it("stores each kind with exactly its fields: cmdFunc only when funcSet, level only for a level", () => {
    const reg = new PermissionRegistry();
    const custom: PermissionFunc = () => undefined;
    reg.register({ kind: "level", domain: "D", type: "L", description: "d", funcSet: false, level: "Authenticated" });
    reg.register({ kind: "custom", domain: "D", type: "C", description: "d", funcSet: true, cmdFunc: custom });
    reg.register({ kind: "administrator", domain: "D", type: "A", description: "d", funcSet: false });
    expect(reg.list()).toEqual([
      { kind: "level", domain: "D", type: "L", description: "d", funcSet: false, level: "Authenticated" },
      { kind: "custom", domain: "D", type: "C", description: "d", funcSet: true, cmdFunc: custom },
      { kind: "administrator", domain: "D", type: "A", description: "d", funcSet: false },
    ]);
    const labels = reg.list().map((p) => {
      switch (p.kind) {
        case "level":
          return p.level; //              narrowed: level is a PermissionLevel
        case "custom":
          return typeof p.cmdFunc; //    narrowed: cmdFunc is a PermissionFunc
        case "administrator":
          return "admin";
      }
    });
    expect(labels).toEqual(["Authenticated", "function", "admin"]);
  });

  it("a built-in level registered as a custom function stays a level: authorized still consults the authorizer", async () => {
    const authorizer = vi.fn<Authorizer>(() => new Error("not in role"));
    const reg = new PermissionRegistry(authorizer);
    reg.register(newPermissionCmdFunc("D", "T", authorized));
    expect(reg.get("D", "T")).toMatchObject({ kind: "level", funcSet: false, level: "Authorized" });
    expect(reg.get("D", "T")?.cmdFunc).toBeUndefined();
    expect(await denial(reg.check(full, envelope("D", "T", full)))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(authorizer).toHaveBeenCalledTimes(1);
    // A hand-made custom permission with a level function too.
    reg.register({ kind: "custom", domain: "D", type: "T2", description: "d", funcSet: true, cmdFunc: authorized });
    expect(reg.get("D", "T2")).toEqual({ kind: "level", domain: "D", type: "T2", description: "d", funcSet: false, level: "Authorized" });
    expect(await denial(reg.check(full, envelope("D", "T2", full)))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(authorizer).toHaveBeenCalledTimes(2);
  });

  it("rejects a duplicate (domain, type) and keeps the first; the same type in another domain is fine", () => {
    const reg = new PermissionRegistry();
    reg.register(newPermission("D", "T", "first", anonymous));
    expect(() => reg.register(newPermission("D", "T", "second", authorized))).toThrow(
      expect.objectContaining({ code: "INVALID_PERMISSION" }),
    );
    reg.register(newPermission("E", "T", "other domain"));
    expect(reg.get("D", "T")?.description).toBe("first");
    expect(reg.list().map((p) => `${p.domain}.${p.type}`)).toEqual(["D.T", "E.T"]);
    expect(reg.list({ domain: "E" }).map((p) => p.description)).toEqual(["other domain"]);
  });

  it("stores a frozen copy: changing the registered object later changes nothing", async () => {
    const reg = new PermissionRegistry();
    const p = newPermission("D", "T", "anon", anonymous);
    reg.register(p);
    const mutable = p as { -readonly [K in "kind" | "level"]: unknown };
    mutable.kind = "administrator";
    mutable.level = undefined;
    expect(Object.isFrozen(reg.get("D", "T"))).toBe(true);
    await reg.check({}, envelope("D", "T"));
  });

  it("get of an unknown permission is undefined; check of one is PERMISSION_DENIED", async () => {
    const reg = new PermissionRegistry(() => undefined);
    expect(reg.get("Nope", "Nothing")).toBeUndefined();
    expect(reg.has("Nope", "Nothing")).toBe(false);
    const e = await denial(reg.check(full, envelope("Nope", "Nothing", full)));
    expect(e?.code).toBe("PERMISSION_DENIED");
    expect(e?.message).toContain("Nope.Nothing");
  });

  it("newPermission / newPermissionCmdFunc set kind, funcSet and level", () => {
    const custom: PermissionFunc = () => undefined;
    expect(newPermission("D", "T", "d")).toEqual({ kind: "administrator", domain: "D", type: "T", description: "d", funcSet: false });
    expect(newPermission("D", "T", "d", authenticated)).toEqual({
      kind: "level",
      domain: "D",
      type: "T",
      description: "d",
      funcSet: false,
      level: "Authenticated",
    });
    expect(newPermission("D", "T", "d", custom)).toEqual({
      kind: "custom",
      domain: "D",
      type: "T",
      description: "d",
      funcSet: true,
      cmdFunc: custom,
    });
    expect(newPermissionCmdFunc("D", "Do", custom)).toMatchObject({
      kind: "custom",
      domain: "D",
      type: "Do",
      funcSet: true,
      cmdFunc: custom,
    });
    expect(newPermissionCmdFunc("D", "Do", anonymous)).toMatchObject({ kind: "level", funcSet: false, level: "Anonymous" });
    expect(newPermissionCmdFunc("D", "Do", custom).description.length).toBeGreaterThan(0);
    expect([anonymous, authenticated, authorized, custom].map(permissionLevelOf)).toEqual([
      "Anonymous",
      "Authenticated",
      "Authorized",
      undefined,
    ]);
  });
});

describe("built-in levels: exactly the sender fields of each level", () => {
  const reg = new PermissionRegistry();
  reg.register(newPermission("L", "Anon", "anonymous", anonymous));
  reg.register(newPermission("L", "Authn", "authenticated", authenticated));
  reg.register(newPermission("L", "Authz", "authorized", authorized));
  const has = (ctx: RequestContext, ...fields: (typeof SENDER_FIELDS)[number][]) => fields.every((f) => ctx[f] !== undefined);

  it.each(subsets)("sender fields %s", async (_name, ctx) => {
    // the non-sender fields never count
    const noisy: RequestContext = {
      ...ctx,
      targetTenantUuid: "t",
      targetAggregateUuid: "a",
      traceId: "x",
      attributes: { senderAccountUuid: "acc" },
    };
    for (const c of [ctx, noisy]) {
      expect(await denial(reg.check(c, envelope("L", "Anon", c)))).toBeUndefined();
      const authn = await denial(reg.check(c, envelope("L", "Authn", c)));
      expect(authn === undefined).toBe(has(c, "senderAccountUuid", "senderSessionUuid"));
      if (authn !== undefined) expect(authn.code).toBe("PERMISSION_DENIED");
      const authz = await denial(reg.check(c, envelope("L", "Authz", c)));
      expect(authz === undefined).toBe(has(c, ...SENDER_FIELDS));
      if (authz !== undefined) expect(authz.code).toBe("PERMISSION_DENIED");
      // the level functions return their error (they do not throw)
      expect(authenticated(c, envelope("L", "Authn", c)) instanceof MnemeError).toBe(authn !== undefined);
      expect(authorized(c, envelope("L", "Authz", c)) instanceof MnemeError).toBe(authz !== undefined);
    }
  });

  it("an empty string is a missing field; the message names what is missing", async () => {
    const e = await denial(reg.check({ ...full, senderIdentityUuid: "" }, envelope("L", "Authz")));
    expect(e?.code).toBe("PERMISSION_DENIED");
    expect(e?.message).toContain("senderIdentityUuid");
    expect(e?.message).not.toContain("senderAccountUuid");
    expect(await denial(reg.check({ senderAccountUuid: "", senderSessionUuid: "s" }, envelope("L", "Authn")))).toMatchObject({
      code: "PERMISSION_DENIED",
    });
  });

  it("evaluate is synchronous when every step is", () => {
    expect(reg.evaluate(full, envelope("L", "Authz", full))).toBeUndefined();
    expect(reg.evaluate({}, envelope("L", "Anon"))).toBeUndefined();
    const d = reg.evaluate({}, envelope("L", "Authz"));
    expect(d).toBeInstanceOf(MnemeError);
    expect((d as MnemeError).code).toBe("PERMISSION_DENIED");
  });
});

describe("custom permission functions", () => {
  function registryWith(fn: PermissionFunc, authorizer?: Authorizer) {
    const reg = new PermissionRegistry(authorizer);
    reg.register(newPermissionCmdFunc("C", "Do", fn));
    return reg;
  }

  it("returning nothing allows, even with no sender at all", async () => {
    expect(await denial(registryWith(() => undefined).check({}, envelope("C", "Do")))).toBeUndefined();
    expect(await denial(registryWith(async () => undefined).check({}, envelope("C", "Do")))).toBeUndefined();
  });

  it("returning a plain Error denies with PERMISSION_DENIED whose cause is that error (sync and async)", async () => {
    const err = new Error("only on Mondays");
    for (const fn of [() => err, async () => err]) {
      const e = await denial(registryWith(fn).check(full, envelope("C", "Do", full)));
      expect(e?.code).toBe("PERMISSION_DENIED");
      expect(e?.cause).toBe(err);
      expect(e?.message).toContain("only on Mondays");
    }
  });

  it("returning or throwing a MnemeError rejects with that very error", async () => {
    const err = new MnemeError("UNAUTHENTICATED", "log in first");
    for (const fn of [
      () => err,
      async () => err,
      () => {
        throw err;
      },
      async () => {
        throw err;
      },
    ]) {
      expect(await denial(registryWith(fn as PermissionFunc).check({}, envelope("C", "Do")))).toBe(err);
    }
  });

  it("throwing (sync or async, Error or not) denies", async () => {
    const err = new TypeError("bug in the permission function");
    for (const fn of [
      () => {
        throw err;
      },
      async () => {
        throw err;
      },
    ]) {
      const e = await denial(registryWith(fn).check(full, envelope("C", "Do", full)));
      expect(e).toMatchObject({ code: "PERMISSION_DENIED", cause: err });
    }
    const s = await denial(
      registryWith(() => {
        throw "nope";
      }).check(full, envelope("C", "Do", full)),
    );
    expect(s).toMatchObject({ code: "PERMISSION_DENIED", cause: "nope" });
  });

  it.each<[string, unknown]>([
    ["false", false],
    ["true", true],
    ["0", 0],
    ["a string", "no"],
    ["an object", { allowed: true }],
  ])("returning %s (neither nothing nor an Error) denies: deny is the default", async (_what, value) => {
    // e.g. `permission: (ctx) => ctx.senderAccountUuid === adminUuid` type-checks (boolean is assignable to void)
    for (const fn of [() => value, async () => value]) {
      const e = await denial(registryWith(fn as PermissionFunc).check(full, envelope("C", "Do", full)));
      expect(e?.code).toBe("PERMISSION_DENIED");
    }
  });

  it("receives the request context and the envelope, and decides alone: the authorizer is not consulted", async () => {
    const authorizer = vi.fn<Authorizer>(() => new Error("authorizer says no"));
    const fn = vi.fn<PermissionFunc>(() => undefined);
    const reg = registryWith(fn, authorizer);
    const env = envelope("C", "Do", {});
    await reg.check({}, env);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(fn.mock.calls[0]!.slice(0, 2)).toEqual([{}, env]);
    expect(authorizer).not.toHaveBeenCalled();
  });
});

describe("the authorizer", () => {
  function registry(authorizer: Authorizer) {
    const reg = new PermissionRegistry(authorizer);
    reg.register(newPermission("A", "Anon", "anonymous", anonymous));
    reg.register(newPermission("A", "Authn", "authenticated", authenticated));
    reg.register(newPermission("A", "Authz", "authorized", authorized));
    return reg;
  }

  it("is consulted only after the authorized level passes, with (reqCtx, permission, envelope)", async () => {
    const authorizer = vi.fn<Authorizer>(() => undefined);
    const reg = registry(authorizer);
    expect(await denial(reg.check({ senderAccountUuid: "a", senderSessionUuid: "s" }, envelope("A", "Authz")))).toMatchObject({
      code: "PERMISSION_DENIED",
    });
    expect(authorizer).not.toHaveBeenCalled();
    // anonymous and authenticated levels do not consult it
    await reg.check({}, envelope("A", "Anon"));
    await reg.check({ senderAccountUuid: "a", senderSessionUuid: "s" }, envelope("A", "Authn"));
    expect(authorizer).not.toHaveBeenCalled();
    const env = envelope("A", "Authz", full);
    await reg.check(full, env);
    expect(authorizer).toHaveBeenCalledTimes(1);
    expect(authorizer).toHaveBeenCalledWith(full, reg.get("A", "Authz"), env);
  });

  it("denies by returning or throwing an Error (sync or async); a MnemeError passes through", async () => {
    const plain = new Error("role missing");
    const own = new MnemeError("PERMISSION_DENIED", "needs role admin");
    const cases: [Authorizer, (e: MnemeError | undefined) => void][] = [
      [() => plain, (e) => expect(e).toMatchObject({ code: "PERMISSION_DENIED", cause: plain })],
      [async () => plain, (e) => expect(e).toMatchObject({ code: "PERMISSION_DENIED", cause: plain })],
      [
        () => {
          throw plain;
        },
        (e) => expect(e).toMatchObject({ code: "PERMISSION_DENIED", cause: plain }),
      ],
      [
        async () => {
          throw plain;
        },
        (e) => expect(e).toMatchObject({ code: "PERMISSION_DENIED", cause: plain }),
      ],
      [() => own, (e) => expect(e).toBe(own)],
      [async () => own, (e) => expect(e).toBe(own)],
      [async () => undefined, (e) => expect(e).toBeUndefined()],
    ];
    for (const [authorizer, verify] of cases) verify(await denial(registry(authorizer).check(full, envelope("A", "Authz", full))));
  });

  it("setAuthorizer installs, replaces and removes it", async () => {
    const reg = registry(() => new Error("no"));
    expect(await denial(reg.check(full, envelope("A", "Authz", full)))).toBeDefined();
    reg.setAuthorizer(() => undefined);
    expect(await denial(reg.check(full, envelope("A", "Authz", full)))).toBeUndefined();
    reg.setAuthorizer(() => new Error("again no"));
    expect(await denial(reg.check(full, envelope("A", "Authz", full)))).toBeDefined();
    reg.setAuthorizer(undefined);
    expect(await denial(reg.check(full, envelope("A", "Authz", full)))).toBeUndefined();
  });
});

describe("the check before commands and queries", () => {
  const facades: Facade[] = [];
  afterEach(async () => {
    for (const f of facades.splice(0)) await f.stop();
  });

  async function setup(opts: { authorizer?: Authorizer } = {}) {
    const Doc = defineDomain("Doc");
    const Saved = Doc.event<object>("Saved");
    const commandSpy = vi.fn((ctx: { tenantUuid: string }) => [Saved.create(`d-${ctx.tenantUuid}`, {})]); // one aggregate per tenant: aggregates belong to a tenant
    const querySpy = vi.fn(() => "answer");
    const Save = Doc.command("Save");
    const SaveAnon = Doc.command("SaveAnon", { permission: anonymous });
    const SaveCustom = Doc.command("SaveCustom", {
      permission: (ctx) => (ctx.attributes?.["role"] === "editor" ? undefined : new Error("editors only")),
    });
    const SaveAttached = Doc.command("SaveAttached");
    Doc.registerPermission(
      newPermissionCmdFunc("Doc", "SaveAttached", async (ctx) => (ctx.traceId === "ok" ? undefined : new Error("bad trace"))),
    );
    const Read = Doc.query<object, string>("Read");
    const ReadAuthn = Doc.query<object, string>("ReadAuthn", { permission: authenticated });
    for (const t of [Save, SaveAnon, SaveCustom, SaveAttached]) Doc.handleCommand(t, commandSpy);
    for (const t of [Read, ReadAuthn]) Doc.handleQuery(t, querySpy);
    const f = createFacade(opts.authorizer ? { authorizer: opts.authorizer } : {}).registerDomain(Doc);
    facades.push(f);
    await f.start();
    return { f, commandSpy, querySpy, Save, SaveAnon, SaveCustom, SaveAttached, Read, ReadAuthn };
  }

  it("a denied command never reaches its handler and appends nothing; an allowed one does", async () => {
    const { f, commandSpy, Save, SaveAnon } = await setup();
    expect(await denial(f.dispatch(Save, {}, { reqCtx: { senderAccountUuid: "a" } }))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(await denial(f.dispatch(Save, {}))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(commandSpy).not.toHaveBeenCalled();
    expect(await f.eventRepository.headPosition()).toBe(0);
    await f.dispatch(SaveAnon, {});
    await f.dispatch(Save, {}, { reqCtx: full });
    expect(commandSpy).toHaveBeenCalledTimes(2);
  });

  it("custom permission functions (option and registerPermission) decide for dispatch, sync and async", async () => {
    const { f, commandSpy, SaveCustom, SaveAttached } = await setup();
    const e = await denial(f.dispatch(SaveCustom, {}, { reqCtx: full }));
    expect(e).toMatchObject({ code: "PERMISSION_DENIED", cause: expect.objectContaining({ message: "editors only" }) });
    expect(await denial(f.dispatch(SaveAttached, {}, { reqCtx: full }))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(commandSpy).not.toHaveBeenCalled();
    await f.dispatch(SaveCustom, {}, { reqCtx: { attributes: { role: "editor" } } });
    await f.dispatch(SaveAttached, {}, { reqCtx: { traceId: "ok" } });
    expect(commandSpy).toHaveBeenCalledTimes(2);
  });

  it("the facade's authorizer is consulted after authorized passes, before the handler, for commands and queries", async () => {
    const order: string[] = [];
    const authorizer = vi.fn<Authorizer>(async (ctx, p) => {
      order.push(`authorizer:${p.type}`);
      return ctx.attributes?.["admin"] === true ? undefined : new Error("not an admin");
    });
    const { f, commandSpy, querySpy, Save, Read, ReadAuthn } = await setup({ authorizer });
    commandSpy.mockImplementation(() => {
      order.push("handler");
      return [];
    });
    expect(await denial(f.dispatch(Save, {}, { reqCtx: full }))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(await denial(f.query(Read, {}, { reqCtx: full }))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(commandSpy).not.toHaveBeenCalled();
    expect(querySpy).not.toHaveBeenCalled();
    // authenticated queries do not consult it
    expect(await f.query(ReadAuthn, {}, { reqCtx: { senderAccountUuid: "a", senderSessionUuid: "s" } })).toBe("answer");
    const adminCtx = { ...full, attributes: { admin: true } };
    await f.dispatch(Save, {}, { reqCtx: adminCtx });
    expect(await f.query(Read, {}, { reqCtx: adminCtx })).toBe("answer");
    expect(order).toEqual(["authorizer:Save", "authorizer:Read", "authorizer:Save", "handler", "authorizer:Read"]);
    // a sender without the level never reaches the authorizer
    authorizer.mockClear();
    expect(await denial(f.query(Read, {}, { reqCtx: { attributes: { admin: true } } }))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(authorizer).not.toHaveBeenCalled();
  });

  it("queries default to authorized, and a denied query never reaches its handler", async () => {
    const { f, querySpy, Read, ReadAuthn } = await setup();
    expect(await denial(f.query(Read, {}, { reqCtx: { senderAccountUuid: "a", senderSessionUuid: "s" } }))).toMatchObject({
      code: "PERMISSION_DENIED",
    });
    expect(await denial(f.query(ReadAuthn, {}, {}))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(querySpy).not.toHaveBeenCalled();
    expect(await f.query(Read, {}, { reqCtx: full })).toBe("answer");
  });

  it("the permission function gets the envelope { commandUuid, domain, name, payload, reqCtx } (a query: queryUuid)", async () => {
    const seen: unknown[] = [];
    const Env = defineDomain("Env");
    const Cmd = Env.command<{ x: number }>("Cmd", { permission: (_ctx, env) => void seen.push(env) });
    const Qry = Env.query<{ y: number }, number>("Qry", { permission: (_ctx, env) => void seen.push(env) });
    Env.handleCommand(Cmd, () => []);
    Env.handleQuery(Qry, () => 1);
    const f = createFacade().registerDomain(Env);
    facades.push(f);
    await f.start();
    const reqCtx = { traceId: "t" };
    const r = await f.dispatch(Cmd, { x: 1 }, { reqCtx });
    await f.query(Qry, { y: 2 }, { reqCtx, queryUuid: "q-1" });
    expect(seen).toEqual([
      { commandUuid: r.commandUuid, domain: "Env", name: "Cmd", payload: { x: 1 }, reqCtx },
      { queryUuid: "q-1", domain: "Env", name: "Qry", payload: { y: 2 }, reqCtx },
    ]);
  });
});

describe("store permissions", () => {
  const facades: Facade[] = [];
  afterEach(async () => {
    for (const f of facades.splice(0)) await f.stop();
  });
  async function facade(authorizer?: Authorizer) {
    const f = createFacade(authorizer ? { authorizer } : {});
    facades.push(f);
    await f.start();
    return f;
  }

  it("registers exactly the 20 <Store>.<Action> permissions of domain Runtime, without level or function, idempotently", async () => {
    const f = await facade();
    const before = f.permissions.list().length;
    const perms = registerStorePermissions(f);
    const names = perms.map((p) => p.type).sort();
    const expected = ["StoreEvent", "StoreCommand", "StoreData", "StoreCache", "StoreLog"]
      .flatMap((s) => ["Info", "Read", "Update", "Delete"].map((a) => `${s}.${a}`))
      .sort();
    expect(names).toEqual(expected);
    expect(STORE_NAMES.length * STORE_ACTIONS.length).toBe(20);
    for (const p of perms) {
      expect(p).toMatchObject({ kind: "administrator", domain: "Runtime", funcSet: false });
      expect(p.level).toBeUndefined();
      expect(p.cmdFunc).toBeUndefined();
      expect(p.description.length).toBeGreaterThan(0);
      expect(f.permissions.get("Runtime", p.type)).toBe(p);
    }
    expect(f.permissions.list().length).toBe(before + 20);
    const again = registerStorePermissions(f);
    expect(again).toEqual(perms);
    expect(f.permissions.list().length).toBe(before + 20);
  });

  it("before registerStorePermissions every store operation fails with STORE_PERMISSIONS_NOT_REGISTERED, even for a granted admin", async () => {
    const f = await facade(() => undefined);
    const s = f.runtime.stores;
    for (const store of STORE_NAMES) {
      expect(await denial(s.info(store, full))).toMatchObject({ code: "STORE_PERMISSIONS_NOT_REGISTERED" });
      expect(await denial(s.read(store, full))).toMatchObject({ code: "STORE_PERMISSIONS_NOT_REGISTERED" });
      expect(await denial(s.update(store, full, "k", "v"))).toMatchObject({ code: "STORE_PERMISSIONS_NOT_REGISTERED" });
      expect(await denial(s.delete(store, full, "k"))).toMatchObject({ code: "STORE_PERMISSIONS_NOT_REGISTERED" });
    }
  });

  it("without an authorizer, store operations are denied even to a fully authorized sender", async () => {
    const f = await facade();
    registerStorePermissions(f);
    for (const store of STORE_NAMES) {
      expect(await denial(f.runtime.stores.info(store, full))).toMatchObject({ code: "PERMISSION_DENIED" });
      expect(await denial(f.runtime.stores.read(store, full))).toMatchObject({ code: "PERMISSION_DENIED" });
    }
    expect(await denial(f.runtime.stores.update("data", full, "k", "v"))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(await f.dataStore.get("k")).toBeUndefined();
  });

  it("an authorizer grant allows exactly what it grants; the authorizer sees the store permission", async () => {
    const calls: string[] = [];
    const f = await facade((ctx, p) => {
      calls.push(p.type);
      return ctx.senderAccountUuid === "root" && p.type.startsWith("StoreData.") ? undefined : new Error(`${p.type} not granted`);
    });
    registerStorePermissions(f);
    const root = { ...full, senderAccountUuid: "root" };
    await f.runtime.stores.update("data", root, "greeting", "hello");
    expect((await f.runtime.stores.info("data", root)).numItems).toBe(1);
    expect((await f.runtime.stores.read("data", root)).items).toHaveLength(1);
    expect(await denial(f.runtime.stores.info("event", root))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(await denial(f.runtime.stores.info("data", full))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(await denial(f.runtime.stores.info("data", {}))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(calls).toEqual(["StoreData.Update", "StoreData.Info", "StoreData.Read", "StoreEvent.Info", "StoreData.Info", "StoreData.Info"]);
  });

  it("the Runtime store queries are gated by the same permissions", async () => {
    const f = await facade((ctx) => (ctx.senderAccountUuid === "root" ? undefined : new Error("admins only")));
    registerStorePermissions(f);
    const root = { ...full, senderAccountUuid: "root" };
    expect(await f.query({ domain: "Runtime", name: "StoreInfo" }, { store: "event" }, { reqCtx: root })).toMatchObject({ numItems: 0 });
    expect(await denial(f.query({ domain: "Runtime", name: "StoreInfo" }, { store: "event" }, { reqCtx: full }))).toMatchObject({
      code: "PERMISSION_DENIED",
    });
  });
});
