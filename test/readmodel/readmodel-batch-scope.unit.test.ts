/**
 * The tenant and the generation a readmodel's batch writes with travel in one
 * context per batch: each event's handler writes with that event's tenant,
 * also after awaits and with events of several tenants in one batch (a
 * restore from zero's pages); what afterBatch writes carries no event's
 * tenant; a handler function called outside any batch still writes with its
 * event's tenant; while a rebuild's batch waits, readers see the served
 * generation, and a live event caught meanwhile lands in the new one with its tenant.
 */
import { afterEach, describe, expect, it } from "vitest";
import { BaseReadmodel, createFacade, defineDomain, type Event, type Facade } from "mneme";
import type { ReadmodelCollection } from "mneme/store";
import { alice, bob } from "../support/shared-places.js";

const Lib = defineDomain("Lib");
const AddBook = Lib.command<{ title: string }>("AddBook");
const BookAdded = Lib.event<{ title: string }>("BookAdded");
Lib.handleCommand(AddBook, (_ctx, c, p) => [BookAdded.create(c.commandUuid, { title: p.title })]);

const tick = () => new Promise<void>((r) => setTimeout(r, 0));

class Shelf extends BaseReadmodel {
  readonly books: ReadmodelCollection<{ title: string }>;
  readonly marks: ReadmodelCollection<{ at: number }>;
  /** Resolved by the test to let the handler of a given title go on. */
  hold: ((title: string) => Promise<void>) | undefined;

  constructor(facade: Facade) {
    super(facade);
    this.domain = "Lib";
    this.name = "Shelf";
    this.books = this.collection("books");
    this.marks = this.collection("marks");
    this.addDomainEventHandler(BookAdded, async (_ctx, e, p) => {
      await tick();
      await this.hold?.(p.title);
      await this.books.put(e.aggregateUuid, { title: p.title });
      await tick();
      await this.books.put(`${e.aggregateUuid}-again`, { title: p.title });
    });
  }

  protected override async afterBatch(): Promise<void> {
    await this.marks.put("last", { at: this.lastPosition });
  }
}

const started: Facade[] = [];
afterEach(async () => {
  for (const f of started.splice(0)) await f.stop().catch(() => undefined);
});

async function running(): Promise<{ f: Facade; shelf: Shelf }> {
  const f = createFacade({ appName: "batch-scope" });
  f.registerDomain(Lib);
  const shelf = new Shelf(f);
  f.registerReadmodel(shelf);
  started.push(f);
  await f.start();
  return { f, shelf };
}

describe("a readmodel batch's tenant and generation", () => {
  it("each event of a many-tenant batch is written with its own tenant, after awaits too; afterBatch writes with none", async () => {
    const { f, shelf } = await running();
    for (let i = 0; i < 10; i++) {
      await f.dispatch(AddBook, { title: `a${i}` }, { reqCtx: alice });
      await f.dispatch(AddBook, { title: `b${i}` }, { reqCtx: bob });
    }
    await shelf.idle();
    const report = await f.runtime.controlEventHandler({ action: "restore", eventHandlerName: "Shelf", restoreFromZero: true });
    expect(report).toBeDefined();
    const titles = async (tenant: string) => (await shelf.asTenant(tenant).books.list()).map((b) => b.title).sort();
    expect(await titles(alice.senderTenantUuid!)).toEqual([...Array.from({ length: 10 }, (_, i) => `a${i}`)].flatMap((t) => [t, t]).sort());
    expect(await titles(bob.senderTenantUuid!)).toEqual([...Array.from({ length: 10 }, (_, i) => `b${i}`)].flatMap((t) => [t, t]).sort());
    expect(await shelf.books.count()).toBe(40);
    // The afterBatch write belongs to no tenant: unscoped reads see it, a tenant's do not.
    expect(await shelf.marks.get("last")).toBeDefined();
    expect(await shelf.asTenant(alice.senderTenantUuid!).marks.get("last")).toBeUndefined();
    expect(await shelf.asTenant(bob.senderTenantUuid!).marks.get("last")).toBeUndefined();
  });

  it("a handler function called outside any batch writes with its event's tenant", async () => {
    const { f, shelf } = await running();
    await f.dispatch(AddBook, { title: "a" }, { reqCtx: alice, waitToFinish: true });
    const stored: Event[] = [];
    for await (const page of f.eventRepository.readAll()) stored.push(...page);
    const e = { ...stored[0]!, tenantUuid: bob.senderTenantUuid!, aggregateUuid: "direct" } as Event<{ title: string }>;
    const [h] = shelf.getDomainEventHandlers(BookAdded);
    await h!.fn({ eventHandlerName: "Shelf", restoring: false }, e, { title: "direct" });
    expect(await shelf.asTenant(bob.senderTenantUuid!).books.get("direct")).toEqual({ title: "direct" });
    expect(await shelf.asTenant(alice.senderTenantUuid!).books.get("direct")).toBeUndefined();
  });

  it("while a rebuild's batch waits readers see the served generation; a live event caught meanwhile lands with its tenant", async () => {
    const { f, shelf } = await running();
    for (let i = 0; i < 5; i++) await f.dispatch(AddBook, { title: `a${i}` }, { reqCtx: alice, waitToFinish: true });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let held = false;
    shelf.hold = async (title) => {
      // The rebuild's first event waits until a live event was dispatched and caught.
      if (title === "a0" && !held) {
        held = true;
        await gate;
      }
    };
    const restore = f.runtime.controlEventHandler({ action: "restore", eventHandlerName: "Shelf", restoreFromZero: true });
    while (!held) await tick();
    await f.dispatch(AddBook, { title: "b-live" }, { reqCtx: bob });
    // Readers see the served generation meanwhile: the five of alice, none of the rebuild.
    expect(await shelf.asTenant(alice.senderTenantUuid!).books.count()).toBe(10);
    release();
    await restore;
    await shelf.idle();
    expect(await shelf.asTenant(bob.senderTenantUuid!).books.count()).toBe(2);
    expect(await shelf.asTenant(alice.senderTenantUuid!).books.count()).toBe(10);
    expect(await shelf.books.count()).toBe(12);
  });
});
