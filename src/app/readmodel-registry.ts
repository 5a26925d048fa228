/**
 * The registered event handlers and readmodels of one facade: registration,
 * lookup (and the tenant's view a handler gets through `ctx.readmodel`),
 * live delivery to their runners, the head position seen, and the waits of
 * `waitToFinish`, `scrubStorage` and start.
 */
import { type BaseEventHandler, runnerOf, toBaseEventHandler } from "../readmodel/base-event-handler.js";
import { BaseReadmodel } from "../readmodel/base-readmodel.js";
import type { DeliveryOptions, HandlerHost, HandlerRunner } from "../readmodel/handler-runner.js";
import { isTenantScopable, type MessageContext } from "../model/context.js";
import { MnemeError } from "../model/errors.js";
import { type EventHandler, isReadmodelHandle, type ReadmodelHandle } from "../model/event-handler.js";
import type { HandlerError } from "../model/facade-handle.js";
import type { Event } from "../model/types.js";
import type { ReadmodelStoreBackend } from "../store/readmodel-store-backend.js";

/** A class of readmodels or handlers, as a lookup by name takes it. */
export type ReadmodelClass = abstract new (...args: any[]) => EventHandler;

/** What the facade keeps of a registered handler. */
interface Registration {
  /** The object given to register / registerReadmodel (a plain EventHandler or a BaseEventHandler). */
  readonly object: EventHandler;
  /** The BaseEventHandler that runs it: the object itself, or the adapter of a plain one. */
  readonly handler: BaseEventHandler;
  readonly runner: HandlerRunner;
  readonly handle: ReadmodelHandle<EventHandler>;
}

export class ReadmodelRegistry {
  /** The registered event handlers by name. */
  readonly handlers = new Map<string, BaseEventHandler>();
  /** Per registered name: the object given, its runner, its handle. */
  readonly #registered = new Map<string, Registration>();
  #head = 0;

  /** The highest event position this facade has seen. */
  get head(): number {
    return this.#head;
  }

  noteHead(position: number): void {
    if (position > this.#head) this.#head = position;
  }

  /** Checks and registers `handler`, attached to `host`; `live`: it goes live at once (the facade is started). */
  register<T extends EventHandler>(handler: T, host: HandlerHost, delivery: DeliveryOptions, live: boolean): ReadmodelHandle<T> {
    const name = handler?.name;
    if (typeof name !== "string" || name.trim() === "")
      throw new MnemeError("INVALID_EVENT_HANDLER", "an event handler needs a non-empty name");
    // "#" and ":" separate a handler's name from the keys of its state (`<name>#p<i>`, `<name>#rebuild`,
    // `<name>:<collection>`): a name holding one would take another handler's checkpoint, lock or collections.
    if (/[#:]/.test(name))
      throw new MnemeError(
        "INVALID_EVENT_HANDLER",
        `event handler name ${JSON.stringify(name)} holds "#" or ":": those separate a handler's name from the keys of its checkpoints, locks and collections`,
      );
    if (typeof handler.domain !== "string" || handler.domain === "")
      throw new MnemeError("INVALID_EVENT_HANDLER", `event handler ${name} needs a domain`);
    if (this.handlers.has(name)) throw new MnemeError("INVALID_EVENT_HANDLER", `an event handler named ${name} is registered already`);
    const h = toBaseEventHandler(handler);
    const runner = runnerOf(h);
    runner.attach(host, delivery);
    const handle: ReadmodelHandle<T> = Object.freeze({ kind: "readmodelHandle", name, readmodel: handler });
    this.handlers.set(name, h);
    this.#registered.set(name, { object: handler, handler: h, runner, handle });
    if (live) void runner.goLive().catch(() => undefined);
    return handle;
  }

  /**
   * The registered object that `ref` names: by name, by this facade's handle,
   * or the object itself when it is the one registered under its name; with
   * `type`, checked with instanceof. UNKNOWN_EVENT_HANDLER otherwise.
   */
  lookup(ref: unknown, type: ReadmodelClass | undefined): EventHandler {
    const found = this.#find(ref);
    if (type === undefined) return found;
    if (typeof type !== "function")
      throw new MnemeError("INVALID_REQUEST", `readmodel(${JSON.stringify(found.name)}, type): type must be a class`);
    const object: object = found;
    if (!(object instanceof type)) {
      throw new MnemeError(
        "UNKNOWN_EVENT_HANDLER",
        `the event handler named ${JSON.stringify(found.name)} is a ${object.constructor?.name || "plain object"}, not a ${type.name || "instance of the class given"}`,
      );
    }
    return found;
  }

  #find(ref: unknown): EventHandler {
    if (typeof ref === "string") {
      const r = this.#registered.get(ref);
      if (r === undefined) throw new MnemeError("UNKNOWN_EVENT_HANDLER", `no event handler named ${JSON.stringify(ref)} is registered`);
      return r.object;
    }
    if (isReadmodelHandle(ref)) {
      const r = this.#registered.get(ref.name);
      if (r === undefined || r.handle !== ref)
        throw new MnemeError("UNKNOWN_EVENT_HANDLER", `the handle of ${JSON.stringify(ref.name)} is not one of this facade`);
      return r.object;
    }
    const name = (ref as { name?: unknown } | null | undefined)?.name;
    const r = typeof name === "string" ? this.#registered.get(name) : undefined;
    if (r === undefined || r.object !== ref)
      throw new MnemeError("UNKNOWN_EVENT_HANDLER", `event handler ${JSON.stringify(name)} is not registered with this facade`);
    return r.object;
  }

  /**
   * `ctx.readmodel` of a handler: the readmodel as the effective tenant may see
   * it — `forTenant(tenantUuid)` of a readmodel that offers it (a
   * ProjectionReadmodel does), else for a BaseReadmodel `asTenant(tenantUuid)`
   * (its tenant-scoped collections hold only that tenant's documents), else
   * the handler object itself.
   */
  scoped(tenantUuid: string): MessageContext["readmodel"] {
    return ((ref: unknown, type?: ReadmodelClass) => {
      const h = this.lookup(ref, type);
      if (isTenantScopable(h)) return h.forTenant(tenantUuid);
      return h instanceof BaseReadmodel ? h.asTenant(tenantUuid) : h;
    }) as MessageContext["readmodel"];
  }

  /** Live events (null: appended elsewhere, read them from the store) to every runner. */
  deliver(events: readonly Event[] | null): void {
    if (events !== null) {
      const last = events[events.length - 1];
      if (last !== undefined && last.position > this.#head) this.#head = last.position;
    }
    for (const r of this.#registered.values()) r.runner.notify(events);
  }

  /** Every handler goes live, one after the other (start). */
  async goLive(): Promise<void> {
    for (const r of this.#registered.values()) await r.runner.goLive();
  }

  /** Waits up to `timeoutMs` for handlers in standby to take over. */
  async untilOutOfStandby(timeoutMs: number): Promise<void> {
    await Promise.all([...this.#registered.values()].map((r) => r.runner.untilOutOfStandby(timeoutMs)));
  }

  /** The names of the handlers in standby (another instance holds their processing lock). */
  inStandby(): string[] {
    return [...this.handlers.values()].filter((h) => h.state === "standby").map((h) => h.name);
  }

  /** Stops every handler that runs or restores. */
  async stopAll(): Promise<void> {
    for (const h of this.handlers.values()) {
      if (h.state !== "stopped" || h.restoring) await h.stop().catch(() => undefined);
    }
  }

  /** The readmodel backends the handlers chose themselves (closed with the facade). */
  backends(): ReadmodelStoreBackend[] {
    const all: ReadmodelStoreBackend[] = [];
    for (const h of this.handlers.values()) {
      const b = (h as { readmodelStoreBackend?: ReadmodelStoreBackend }).readmodelStoreBackend;
      if (b !== undefined) all.push(b);
    }
    return all;
  }

  /** The running handlers that have not handled up to `head` before `timeout` settles (sorted names). */
  async behind(head: number, timeout: Promise<"timeout">): Promise<string[]> {
    const behind: string[] = [];
    await Promise.all(
      [...this.#registered.values()].map(async ({ handler: h, runner }) => {
        if (h.state !== "running") return;
        const r = await Promise.race([runner.waitFor(head, head), timeout]);
        if (r !== undefined) behind.push(h.name);
      }),
    );
    return behind.sort();
  }

  /** waitToFinish: waits until every running handler (and the holder of each in standby) has applied `events`. */
  async waitHandlers(events: readonly Event[]): Promise<HandlerError[]> {
    const from = events[0]!.position;
    const to = events[events.length - 1]!.position;
    const waits: Promise<HandlerError | undefined>[] = [];
    for (const { handler: h, runner } of this.#registered.values()) {
      if (runner.partitions !== undefined) {
        // Each partition is waited for where it runs: here, or on the instance holding it.
        waits.push(
          runner.waitForPartitions(events).then((error) => (error === undefined ? undefined : { eventHandlerName: h.name, error })),
        );
        continue;
      }
      if (h.state === "standby") {
        const w = waitForHolder(h, runner, events);
        if (w !== undefined) waits.push(w);
        continue;
      }
      if (h.state !== "running") continue;
      waits.push(
        runner.waitFor(from, to).then((error) => {
          if (error === undefined) return undefined;
          // The lock went to another instance before these events were applied here: that one applies them.
          if (h.state === "standby") return waitForHolder(h, runner, events);
          return { eventHandlerName: h.name, error };
        }),
      );
    }
    const out: HandlerError[] = [];
    for (const r of await Promise.all(waits)) if (r !== undefined) out.push(r);
    return out;
  }
}

/**
 * A handler in standby applies the events on the instance holding its lock:
 * waited for through its shared checkpoint, up to the last of these events it handles.
 */
function waitForHolder(
  h: BaseEventHandler,
  runner: HandlerRunner,
  events: readonly Event[],
): Promise<HandlerError | undefined> | undefined {
  const mine = events.filter((e) => h.getDomainEventHandlers(`${e.domain}.${e.name}`).length > 0);
  if (mine.length === 0) return undefined;
  return runner
    .waitForHolder(mine[0]!.position, mine[mine.length - 1]!.position)
    .then((error) => (error === undefined ? undefined : { eventHandlerName: h.name, error }));
}
