/**
 * dispatch({ waitToFinish }): resolves after every running event handler has
 * applied the command's events; a failing handler is reported in handlerErrors
 * while the command succeeds and its events stay committed.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  BaseReadmodel,
  createFacade,
  defineDomain,
  type EventType,
  type Facade,
  isMnemeError,
  ProjectionReadmodel,
  type RequestContext,
} from "mneme";
import type { ReadmodelFacade } from "mneme/types";

const admin: RequestContext = {
  senderAccountUuid: "acc-1",
  senderSessionUuid: "ses-1",
  senderIdentityUuid: "idn-1",
  senderTenantUuid: "ten-1",
};

function notesDomain() {
  const Notes = defineDomain("Notes");
  const Written = Notes.event<{ text: string }>("Written");
  const Note = Notes.aggregate<{ text: string; edits: number }>("Note", {
    initialState: () => ({ text: "", edits: 0 }),
    evolve: { Written: (s, p: { text: string }) => ({ text: p.text, edits: s.edits + 1 }) },
  });
  const Write = Notes.command<{ noteUuid: string; text: string }>("Write");
  Notes.handleCommand(Write, (_c, _m, p) => [Written.create(p.noteUuid, { text: p.text })]);
  return { Notes, Written, Note, Write };
}

/** A readmodel whose handler waits on a gate the test opens, and fails on text "fail". */
class GatedReadmodel extends BaseReadmodel {
  readonly applied: string[] = [];
  gate: Promise<void> = Promise.resolve();

  constructor(facade: ReadmodelFacade, name: string, Written: EventType<{ text: string }>) {
    super(facade);
    this.domain = "Notes";
    this.name = name;
    this.addDomainEventHandler(Written, async (_ctx, event, p) => {
      await this.gate;
      if (p.text === "fail") throw new Error(`${name} cannot take it`);
      this.applied.push(p.text);
      await this.collection<{ text: string }>("notes").put(event.aggregateUuid, { text: p.text });
    });
  }

  async text(noteUuid: string): Promise<string | undefined> {
    return (await this.collection<{ text: string }>("notes").get(noteUuid))?.text;
  }
}

const facades: Facade[] = [];
afterEach(async () => {
  for (const f of facades.splice(0)) await f.stop();
});

async function ticks(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** A started facade with the Notes domain and one gated readmodel. */
async function gatedFacade() {
  const { Notes, Written, Write } = notesDomain();
  const f = createFacade().registerDomain(Notes);
  facades.push(f);
  const rm = new GatedReadmodel(f, "Gated", Written);
  f.registerReadmodel(rm);
  await f.start();
  return { f, rm, Write };
}

describe("waitToFinish", () => {
  it("resolves only after a slow async handler has applied the command's events", async () => {
    const { f, rm, Write } = await gatedFacade();

    let open!: () => void;
    rm.gate = new Promise((r) => (open = r));
    let done = false;
    const pending = f.dispatch(Write, { noteUuid: "n", text: "hello" }, { reqCtx: admin, waitToFinish: true }).then((r) => {
      done = true;
      return r;
    });
    await ticks(20);
    expect(done).toBe(false);
    // the event is committed already, only the handler is pending
    expect((await f.eventRepository.loadAggregate("n")).length).toBe(1);
    open();
    const r = await pending;
    expect(r.handlerErrors).toEqual([]);
    expect(r.events).toHaveLength(1);
    expect(rm.applied).toEqual(["hello"]);
    expect(await rm.text("n")).toBe("hello");
  });

  it("without waitToFinish, dispatch resolves with the committed events before the handler ran", async () => {
    const { f, rm, Write } = await gatedFacade();
    let open!: () => void;
    rm.gate = new Promise((r) => (open = r));
    const r = await f.dispatch(Write, { noteUuid: "n", text: "hello" }, { reqCtx: admin });
    expect(r.events.map((e) => e.version)).toEqual([1]);
    expect(rm.applied).toEqual([]);
    open();
    await rm.idle();
    expect(rm.applied).toEqual(["hello"]);
  });

  it("reports a failing handler in handlerErrors; the command succeeds, its events stay committed, other handlers are waited for", async () => {
    const { Notes, Written, Write, Note } = notesDomain();
    const f = createFacade().registerDomain(Notes);
    facades.push(f);
    // both gated readmodels fail on "fail" (one of them slowly); the projection does not
    const failing = new GatedReadmodel(f, "Fragile", Written);
    const slowFailing = new GatedReadmodel(f, "Sturdy", Written);
    const projection = new ProjectionReadmodel(f, { aggregate: Note });
    f.registerReadmodel(failing);
    f.registerReadmodel(slowFailing);
    f.registerReadmodel(projection);
    await f.start();
    slowFailing.gate = ticks(5);

    await f.dispatch(Write, { noteUuid: "n", text: "first" }, { reqCtx: admin, waitToFinish: true });
    const r = await f.dispatch(Write, { noteUuid: "n", text: "fail" }, { reqCtx: admin, waitToFinish: true });
    expect(r.events.map((e) => e.version)).toEqual([2]);
    const names = r.handlerErrors.map((h) => h.eventHandlerName).sort();
    expect(names).toEqual(["Fragile", "Sturdy"]);
    for (const h of r.handlerErrors) {
      expect(isMnemeError(h.error, "HANDLER_FAILED")).toBe(true);
      expect(h.error.message).toContain("cannot take it");
      expect((h.error.cause as Error).message).toBe(`${h.eventHandlerName} cannot take it`);
    }
    // the command is recorded as succeeded and its event is in the store and in the projection
    expect((await f.commandStore.get(r.commandUuid))?.status).toBe("succeeded");
    expect((await f.eventRepository.loadAggregate("n")).map((e) => e.version)).toEqual([1, 2]);
    expect((await projection.getModel("n"))?.model).toEqual({ text: "fail", edits: 2 });
    expect(f.eventHandlers.get("Fragile")?.state).toBe("failed");
    expect(failing.getMetrics().lastError).toContain("cannot take it");

    // a failed handler is not waited for by later commands (it is not running)
    const later = await f.dispatch(Write, { noteUuid: "n", text: "later" }, { reqCtx: admin, waitToFinish: true });
    expect(later.handlerErrors).toEqual([]);
    expect((await projection.getModel("n"))?.version).toBe(3);
  });

  it("with a ProjectionReadmodel the model is readable as soon as dispatch resolves", async () => {
    const { Notes, Write, Note } = notesDomain();
    const f = createFacade().registerDomain(Notes);
    facades.push(f);
    const projection = new ProjectionReadmodel(f, { aggregate: Note });
    f.registerReadmodel(projection);
    await f.start();
    for (let i = 1; i <= 20; i++) {
      await f.dispatch(Write, { noteUuid: "n", text: `v${i}` }, { reqCtx: admin, waitToFinish: true });
      expect(await projection.getModel("n")).toMatchObject({ version: i, model: { text: `v${i}`, edits: i } });
    }
  });

  it("concurrent waitToFinish commands each resolve after their own events are applied", async () => {
    const { Notes, Write, Note } = notesDomain();
    const f = createFacade().registerDomain(Notes);
    facades.push(f);
    const projection = new ProjectionReadmodel(f, { aggregate: Note });
    f.registerReadmodel(projection);
    await f.start();
    await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const r = await f.dispatch(Write, { noteUuid: `n${i % 3}`, text: `t${i}` }, { reqCtx: admin, waitToFinish: true });
        const m = await projection.getModel(`n${i % 3}`);
        expect(m!.version).toBeGreaterThanOrEqual(r.events[0]!.version);
      }),
    );
  });

  it("a command with no events resolves at once with waitToFinish", async () => {
    const D = defineDomain("D");
    const Noop = D.command("Noop");
    D.handleCommand(Noop, () => []);
    const { Notes, Written } = notesDomain();
    const f = createFacade().registerDomain(D).registerDomain(Notes);
    facades.push(f);
    const rm = new GatedReadmodel(f, "Gated", Written);
    f.registerReadmodel(rm);
    await f.start();
    rm.gate = new Promise(() => undefined); // never opens: must not matter
    const r = await f.dispatch(Noop, {}, { reqCtx: admin, waitToFinish: true });
    expect(r).toMatchObject({ events: [], handlerErrors: [] });
  });
});
