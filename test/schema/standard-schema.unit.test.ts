/**
 * Standard Schema v1 validators as the `schema` of commands, queries and
 * events, with zod 4, valibot and arktype: the payload type inferred from the
 * validator, payloads validated by it (VALIDATION_FAILED with a JSON pointer
 * per issue, nothing appended), asynchronous validators awaited, and the
 * Runtime's JSON Schema 2020-12 taken from Standard JSON Schema where the
 * library offers it, with no build step.
 */
import { afterEach, describe, expect, expectTypeOf, it } from "vitest";
import { type } from "arktype";
import * as v from "valibot";
import { toStandardJsonSchema } from "@valibot/to-json-schema";
import { z } from "zod";
import { anonymous, createFacade, defineDomain, type Facade, isMnemeError } from "mneme";
import type { StandardSchemaV1 } from "mneme/types";
import { rejection, thrownWith } from "../support/rejections.js";

const S2020 = "https://json-schema.org/draft/2020-12/schema";

const libraries = {
  zod: {
    command: z.object({ title: z.string().min(1), qty: z.number().int().optional() }),
    query: z.object({ title: z.string() }),
    event: z.object({ title: z.string(), qty: z.number().int() }),
  },
  valibot: {
    command: toStandardJsonSchema(
      v.object({ title: v.pipe(v.string(), v.minLength(1)), qty: v.optional(v.pipe(v.number(), v.integer())) }),
    ),
    query: toStandardJsonSchema(v.object({ title: v.string() })),
    event: toStandardJsonSchema(v.object({ title: v.string(), qty: v.pipe(v.number(), v.integer()) })),
  },
  arktype: {
    command: type({ title: "string > 0", "qty?": "number.integer" }),
    query: type({ title: "string" }),
    event: type({ title: "string", qty: "number.integer" }),
  },
} as const;

interface ItemInput {
  title: string;
  qty?: number | undefined;
}

function shop(schemas: {
  command: StandardSchemaV1<ItemInput>;
  query: StandardSchemaV1<{ title: string }>;
  event: StandardSchemaV1<{ title: string; qty: number }>;
}) {
  const Shop = defineDomain("Shop");
  const AddItem = Shop.command("AddItem", { schema: schemas.command, permission: anonymous });
  const FindItem = Shop.query<typeof schemas.query, string[]>("FindItem", { schema: schemas.query, permission: anonymous });
  const ItemAdded = Shop.event("ItemAdded", { schema: schemas.event });
  const seen: unknown[] = [];
  Shop.handleCommand(AddItem, (_ctx, c, p) => {
    seen.push(p);
    return [ItemAdded.create(c.commandUuid, { title: p.title, qty: p.qty ?? 1 })];
  });
  Shop.handleQuery(FindItem, (_ctx, _q, p) => [p.title]);
  return { Shop, AddItem, FindItem, ItemAdded, seen };
}

describe.each(Object.entries(libraries))("Standard Schema with %s", (vendor, schemas) => {
  let facade: Facade | undefined;
  afterEach(async () => {
    await facade?.stop();
    facade = undefined;
  });

  async function started() {
    const d = shop(schemas);
    facade = createFacade();
    facade.registerDomain(d.Shop);
    await facade.start();
    return { ...d, facade };
  }

  it("validates command payloads with the validator: the handler gets the payload as sent", async () => {
    const { facade: f, AddItem, seen } = await started();
    const out = await f.dispatch(AddItem, { title: "pen", qty: 2 });
    expect(out.events.map((e) => e.payload)).toEqual([{ title: "pen", qty: 2 }]);
    expect(seen).toEqual([{ title: "pen", qty: 2 }]);
  });

  it("refuses an invalid payload with VALIDATION_FAILED, a pointer per issue, and appends nothing", async () => {
    const { facade: f, AddItem, seen } = await started();
    const err = await rejection(f.dispatch(AddItem, { title: "", qty: 1.5 }));
    expect(err.code).toBe("VALIDATION_FAILED");
    expect((err.details ?? []).map((d) => d.pointer).sort()).toEqual(["/qty", "/title"]);
    expect(err.message).toContain("Shop.AddItem");
    expect(seen).toEqual([]);
    expect(f.headPosition).toBe(0);
    const notObject = await rejection(f.dispatch(AddItem, "pen" as never));
    expect(notObject.code).toBe("VALIDATION_FAILED");
    expect(notObject.details?.[0]).toMatchObject({ pointer: "" });
  });

  it("validates query payloads", async () => {
    const { facade: f, FindItem } = await started();
    expect(await f.query(FindItem, { title: "pen" })).toEqual(["pen"]);
    const err = await rejection(f.query(FindItem, { title: 7 } as never));
    expect(err.code).toBe("VALIDATION_FAILED");
    expect(err.details?.map((d) => d.pointer)).toEqual(["/title"]);
  });

  it("gives the Runtime the JSON Schema 2020-12 of each type, without a build step", async () => {
    const { facade: f } = await started();
    const command = f.runtime.getSchema({ domain: "Shop", type: "AddItem" });
    expect(command.$schema).toBe(S2020);
    expect(command).toMatchObject({ type: "object", required: ["title"] });
    expect(Object.keys(command.properties as object).sort()).toEqual(["qty", "title"]);
    const event = f.runtime.getSchema({ domain: "Shop", type: "ItemAdded" });
    expect(event.$schema).toBe(S2020);
    expect([...(event.required as string[])].sort()).toEqual(["qty", "title"]);
    expect(f.runtime.systemInfo().unvalidated).toEqual([]);
    expect(schemas.command["~standard"].vendor).toBe(vendor);
  });
});

describe("Standard Schema: types, asynchronous validators, libraries without JSON Schema", () => {
  let facade: Facade | undefined;
  afterEach(async () => {
    await facade?.stop();
    facade = undefined;
  });

  it("infers the payload type of commands, queries and events from the validator", () => {
    const D = defineDomain("Types");
    const C = D.command("C", { schema: z.object({ title: z.string(), qty: z.number().optional() }) });
    expectTypeOf(C).toExtend<{ kind: "command" }>();
    const Q = D.query<typeof querySchema, number>("Q", { schema: querySchema });
    const E = D.event("E", { schema: z.object({ at: z.number() }) });
    D.handleCommand(C, (_ctx, _c, p) => {
      expectTypeOf(p).toEqualTypeOf<{ title: string; qty?: number | undefined }>();
      return [E.create("a", { at: 1 })];
    });
    D.handleQuery(Q, (_ctx, _q, p) => {
      expectTypeOf(p).toEqualTypeOf<{ name: string }>();
      return p.name.length;
    });
    // @ts-expect-error: the event's payload type comes from its schema
    E.create("a", { at: "now" });
    expect([C.name, Q.name, E.name]).toEqual(["C", "Q", "E"]);
  });

  it("awaits an asynchronous validator (an async refinement) and refuses with its pointer", async () => {
    const D = defineDomain("Async");
    const Rename = D.command("Rename", {
      permission: anonymous,
      schema: z.object({
        name: z.string().refine(async (n) => {
          await new Promise((r) => setTimeout(r, 5));
          return n !== "taken";
        }, "is taken"),
      }),
    });
    D.handleCommand(Rename, () => []);
    facade = createFacade();
    facade.registerDomain(D);
    await facade.start();
    await facade.dispatch(Rename, { name: "free" });
    const err = await rejection(facade.dispatch(Rename, { name: "taken" }));
    expect(err.code).toBe("VALIDATION_FAILED");
    expect(err.details).toEqual([expect.objectContaining({ pointer: "/name", message: "is taken" })]);
    // The synchronous validator of the registry cannot answer for it, and says so.
    expect(() => facade!.schemas.validator(Rename)!({ name: "x" })).toThrow(/validates asynchronously/);
  });

  it("a validator whose library offers no JSON Schema still validates, and GetSchema says what to do", async () => {
    const D = defineDomain("Plain");
    const Add = D.command("Add", { schema: v.object({ n: v.number() }), permission: anonymous });
    D.handleCommand(Add, () => []);
    facade = createFacade();
    facade.registerDomain(D);
    await facade.start();
    expect((await rejection(facade.dispatch(Add, { n: "1" } as never))).details?.[0]).toMatchObject({ pointer: "/n" });
    expect(facade.runtime.systemInfo().unvalidated).toEqual([]);
    const err = await rejection(Promise.resolve().then(() => facade!.runtime.getSchema({ domain: "Plain", type: "Add" })));
    expect(err.code).toBe("UNKNOWN_SCHEMA_TYPE");
    expect(err.message).toMatch(/valibot schema, which offers no JSON Schema.*toStandardJsonSchema/);
  });

  it("a validator that throws is INVALID_REQUEST naming the type, not a crash", async () => {
    const D = defineDomain("Broken");
    const broken: StandardSchemaV1<{ n: number }> = {
      "~standard": {
        version: 1,
        vendor: "handmade",
        validate: () => {
          throw new Error("boom");
        },
      },
    };
    const Add = D.command("Add", { schema: broken, permission: anonymous });
    D.handleCommand(Add, () => []);
    facade = createFacade();
    facade.registerDomain(D);
    await facade.start();
    const err = await rejection(facade.dispatch(Add, { n: 1 }));
    expect(err.code).toBe("INVALID_REQUEST");
    expect(err.message).toContain("handmade schema of command Broken.Add threw while validating: boom");
  });
});

const querySchema = z.object({ name: z.string() });

describe("an event type's schema validates the payloads handlers return", () => {
  let facade: Facade | undefined;
  afterEach(async () => {
    await facade?.stop();
    facade = undefined;
  });

  const counted = {
    zod: z.object({ n: z.number().int().min(1) }),
    valibot: v.object({ n: v.pipe(v.number(), v.integer(), v.minValue(1)) }),
    arktype: type({ n: "number.integer >= 1" }),
    "JSON Schema": { type: "object", properties: { n: { type: "integer", minimum: 1 } }, required: ["n"] },
  } as const;

  /** A domain whose command returns the events it is asked for: a good one first, then `n` as given. */
  async function counter(schema: (typeof counted)[keyof typeof counted]) {
    const D = defineDomain("Counter");
    const Count = D.command<{ ns: unknown[] }>("Count", { permission: anonymous });
    const Counted = D.event<{ n: number }>("Counted", { schema: schema as never });
    const Plain = D.event<{ n: number }>("Plain");
    D.handleCommand(Count, (_ctx, c, p) => [
      Plain.create(c.commandUuid, { n: -1 }),
      ...p.ns.map((n) => Counted.create(c.commandUuid, { n } as never)),
    ]);
    facade = createFacade();
    facade.registerDomain(D);
    await facade.start();
    return { f: facade, Count };
  }

  it.each(Object.entries(counted))(
    "%s: a handler returning { n: -5 } fails the command with INVALID_EVENTS, pointers into the events, nothing appended",
    async (_vendor, schema) => {
      const { f, Count } = await counter(schema);
      const err = await rejection(f.dispatch(Count, { ns: [3, -5] }));
      expect(err.code).toBe("INVALID_EVENTS");
      expect(err.details?.map((d) => d.pointer)).toEqual(["/2/payload/n"]);
      expect(err.message).toContain("Counter.Counted at index 2");
      expect(f.headPosition).toBe(0);
      const wrongType = await rejection(f.dispatch(Count, { ns: [null] }));
      expect(wrongType.code).toBe("INVALID_EVENTS");
      expect(wrongType.details?.map((d) => d.pointer)).toEqual(["/1/payload/n"]);
      // Valid payloads are appended as returned; an event type without a schema is not validated.
      const ok = await f.dispatch(Count, { ns: [1, 7] });
      expect(ok.events.map((e) => e.payload)).toEqual([{ n: -1 }, { n: 1 }, { n: 7 }]);
    },
  );

  it("awaits an asynchronous event validator; nothing is appended when it refuses", async () => {
    const D = defineDomain("AsyncEvents");
    const Name = D.command<{ name: string }>("Name", { permission: anonymous });
    const Named = D.event("Named", {
      schema: z.object({
        name: z.string().refine(async (n) => {
          await new Promise((r) => setTimeout(r, 2));
          return n !== "taken";
        }, "is taken"),
      }),
    });
    D.handleCommand(Name, (_ctx, c, p) => [Named.create(c.commandUuid, p)]);
    facade = createFacade();
    facade.registerDomain(D);
    await facade.start();
    const err = await rejection(facade.dispatch(Name, { name: "taken" }));
    expect(err.code).toBe("INVALID_EVENTS");
    expect(err.details).toEqual([expect.objectContaining({ pointer: "/0/payload/name", message: "is taken" })]);
    expect(facade.headPosition).toBe(0);
    expect((await facade.dispatch(Name, { name: "free" })).events).toHaveLength(1);
  });

  it("a JSON Schema of an event that does not compile fails at registration, not in a command", () => {
    const D = defineDomain("BadEvents");
    D.event("Bad", { schema: { type: "object", properties: { n: { type: "no-such-type" } } } });
    expect(
      isMnemeError(
        thrownWith("INVALID_REQUEST", () => createFacade().registerDomain(D)),
        "INVALID_REQUEST",
      ),
    ).toBe(true);
  });
});
