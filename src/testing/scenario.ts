import { eventTags } from "../app/append.js";
import { type ErrorCode, isMnemeError } from "../model/errors.js";
import type { Facade } from "../app/facade.js";
import type { CommandType } from "../model/tokens.js";
import type { Event, NewEvent, RequestContext } from "../model/types.js";
import { isDeepStrictEqual } from "node:util";

/** An expected event: its type and payload, and optionally its aggregate. */
export interface ExpectedEvent {
  domain: string;
  name: string;
  payload: unknown;
  aggregateUuid?: string;
}

/**
 * Given / when / then for command handlers, on any started facade.
 * @example
 * await scenario(facade)
 *   .given([TodoCreated.create(id, { title: "a" })])
 *   .when(RenameTodo, { todoUuid: id, title: "b" }, { reqCtx })
 *   .then([TodoRenamed.create(id, { title: "b" })]);
 */
export function scenario(facade: Facade): ScenarioGiven {
  return new Scenario(facade, []);
}

export interface ScenarioGiven {
  /**
   * Events already in the store (appended directly, with no command, when
   * `then` or `thenThrows` runs the scenario). An event without `tenantUuid`
   * is appended in the command's tenant (`reqCtx.targetTenantUuid ??
   * reqCtx.senderTenantUuid ?? ""`), so the command can load its aggregate.
   */
  given(events: readonly NewEvent[]): ScenarioWhen;
  when<P>(type: CommandType<P, any>, payload: P, opts?: { reqCtx?: RequestContext }): ScenarioThen;
}
export interface ScenarioWhen {
  when<P>(type: CommandType<P, any>, payload: P, opts?: { reqCtx?: RequestContext }): ScenarioThen;
}
/**
 * The expectation step. `when()` runs nothing by itself: the command runs when
 * `then([...])` or `thenThrows(code)` is called. Awaiting `when(...)` directly
 * is a mistake that TypeScript reports (its `then` is not a promise's); in
 * JavaScript it rejects at once with an error saying so.
 */
export interface ScenarioThen {
  /** The command appended exactly these events (domain, name, payload, and aggregate when given), in order. */
  then(expected: readonly ExpectedEvent[]): Promise<Event[]>;
  /** The command failed with a MnemeError of this code (mneme's own or a user code) and appended nothing. */
  thenThrows(code: ErrorCode): Promise<Error>;
}

class Scenario implements ScenarioGiven, ScenarioWhen {
  constructor(
    readonly facade: Facade,
    readonly history: readonly NewEvent[],
  ) {}

  given(events: readonly NewEvent[]): ScenarioWhen {
    return new Scenario(this.facade, [...this.history, ...events]);
  }

  /** A given event as a command would have stored it: in the command's tenant unless it names one, with its type's tags. */
  private stored(e: NewEvent, tenantUuid: string): NewEvent {
    const type = this.facade.eventType(`${e.domain}.${e.name}`);
    const tags = e.tags === undefined && type?.tags !== undefined ? { tags: eventTags(type, e.payload, 0) } : {};
    return { ...e, ...(e.tenantUuid === undefined ? { tenantUuid } : {}), ...tags };
  }

  when<P>(type: CommandType<P, any>, payload: P, opts: { reqCtx?: RequestContext } = {}): ScenarioThen {
    const run = async (): Promise<{ events?: Event[]; error?: unknown; before: number }> => {
      if (this.history.length > 0) {
        // History belongs to the tenant the command acts in (an aggregate is its first event's tenant's), unless an event names one.
        const tenantUuid = opts.reqCtx?.targetTenantUuid ?? opts.reqCtx?.senderTenantUuid ?? "";
        await this.facade.eventRepository.append(this.history.map((e) => this.stored(e, tenantUuid)));
      }
      const before = await this.facade.eventRepository.headPosition();
      try {
        const r = await this.facade.dispatch(type, payload, { ...(opts.reqCtx ? { reqCtx: opts.reqCtx } : {}), waitToFinish: true });
        return { events: r.events, before };
      } catch (error) {
        return { error, before };
      }
    };
    const facade = this.facade;
    const expectEvents = async (expected: readonly ExpectedEvent[]): Promise<Event[]> => {
      const r = await run();
      if (r.error !== undefined)
        throw new Error(`expected events, but the command failed: ${String((r.error as Error).message ?? r.error)}`, { cause: r.error });
      const actual = (r.events ?? []).map((e) => ({ domain: e.domain, name: e.name, payload: e.payload, aggregateUuid: e.aggregateUuid }));
      const want = expected.map((e) => ({
        domain: e.domain,
        name: e.name,
        payload: e.payload,
        ...(e.aggregateUuid === undefined ? {} : { aggregateUuid: e.aggregateUuid }),
      }));
      const comparable = actual.map((a, i) =>
        want[i]?.aggregateUuid === undefined ? { domain: a.domain, name: a.name, payload: a.payload } : a,
      );
      if (!isDeepStrictEqual(comparable, want)) {
        throw new Error(
          `the command appended\n${JSON.stringify(comparable, null, 2)}\nbut the scenario expected\n${JSON.stringify(want, null, 2)}`,
        );
      }
      return r.events ?? [];
    };
    return {
      then(expected: readonly ExpectedEvent[], onRejected?: unknown): Promise<Event[]> {
        if (!Array.isArray(expected)) return notAwaitable(onRejected);
        return expectEvents(expected);
      },
      async thenThrows(code) {
        const r = await run();
        if (r.error === undefined) throw new Error(`expected ${code}, but the command succeeded with ${r.events?.length ?? 0} event(s)`);
        if (!isMnemeError(r.error, code)) {
          throw new Error(
            `expected ${code}, got ${isMnemeError(r.error) ? r.error.code : "a non-mneme error"}: ${(r.error as Error).message}`,
            { cause: r.error },
          );
        }
        const after = await facade.eventRepository.headPosition();
        if (after !== r.before) throw new Error(`the command failed with ${code} but appended ${after - r.before} event(s)`);
        return r.error;
      },
    };
  }
}

/**
 * `await scenario(...).when(...)` (no `.then([...])` / `.thenThrows(code)`)
 * calls `then(resolve, reject)`: reject at once with a clear error, before
 * anything runs, instead of a promise that never settles.
 */
function notAwaitable(onRejected: unknown): Promise<Event[]> {
  const error = new Error(
    "scenario(...).when(...) was awaited without an expectation, so nothing ran: finish it with .then([...expected events]) or .thenThrows(code)",
  );
  if (typeof onRejected === "function") (onRejected as (e: unknown) => void)(error);
  const rejected = Promise.reject(error);
  rejected.catch(() => undefined); // the await above is told already; this promise is for a direct caller
  return rejected;
}
