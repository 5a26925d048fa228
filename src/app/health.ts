import { isMnemeError, MnemeError } from "../model/errors.js";
import type { EventHandlerInfo } from "../model/event-handler.js";
import type { EventRepository } from "../store/event-repository.js";

/** Pass or fail, for one check and for a whole report. */
export type HealthStatus = "pass" | "fail";

/** One check of a report: its verdict, and for a failure what failed (never a message from a driver). */
export interface HealthCheck {
  readonly status: HealthStatus;
  /** For a person: what failed, in mneme's words. */
  readonly detail?: string;
  readonly [field: string]: unknown;
}

/** What checkLiveness and checkReadiness answer: `pass` when every check passed. */
export interface HealthReport {
  readonly status: HealthStatus;
  readonly checks: Readonly<Record<string, HealthCheck>>;
}

/** Thresholds of the health checks; every one has a default (HEALTH_DEFAULTS). */
export interface HealthOptions {
  /** A running event handler further behind the event store's head than this many positions makes the facade not ready. Default 1000. */
  readonly maxLag?: number;
  /** The event store's read must answer within this many ms, else it counts as down. Default 2000. */
  readonly timeoutMs?: number;
  /** Liveness fails when one turn of the event loop takes longer than this many ms. Default 5000. */
  readonly maxEventLoopDelayMs?: number;
}

/** The defaults of HealthOptions. */
export const HEALTH_DEFAULTS = Object.freeze({ maxLag: 1000, timeoutMs: 2000, maxEventLoopDelayMs: 5000 });

/** What readiness reads of a facade (a Facade is one). */
export interface HealthSubject {
  /** The facade's lifecycle state; only "started" is ready. */
  readonly state: string;
  /** The highest position this process has seen (the lag's reference when the store cannot be read). */
  readonly headPosition: number;
  readonly eventRepository: Pick<EventRepository, "headPosition">;
  readonly runtime: { listEventHandlers(): EventHandlerInfo[] };
}

/** Checks the options (INVALID_REQUEST on a bad value) and fills in the defaults. */
export function resolveHealthOptions(options: HealthOptions = {}): Required<HealthOptions> {
  if (typeof options !== "object" || options === null) throw new MnemeError("INVALID_REQUEST", "health options must be an object");
  return {
    maxLag: nonNegativeInt("maxLag", options.maxLag ?? HEALTH_DEFAULTS.maxLag),
    timeoutMs: positiveInt("timeoutMs", options.timeoutMs ?? HEALTH_DEFAULTS.timeoutMs),
    maxEventLoopDelayMs: positiveInt("maxEventLoopDelayMs", options.maxEventLoopDelayMs ?? HEALTH_DEFAULTS.maxEventLoopDelayMs),
  };
}

/**
 * Liveness: the process is up and its event loop answers. Waits one turn of
 * the loop and fails when that took longer than `maxEventLoopDelayMs` (the
 * process is stuck and a restart may help). Reads nothing else: a database
 * that is down must not get a healthy process restarted.
 * @example
 * if ((await checkLiveness()).status === "fail") process.exitCode = 1;
 */
export async function checkLiveness(options: HealthOptions = {}): Promise<HealthReport> {
  const opts = resolveHealthOptions(options);
  const t0 = performance.now();
  await new Promise<void>((resolve) => setTimeout(resolve, 0));
  const delayMs = round(performance.now() - t0);
  const pass = delayMs <= opts.maxEventLoopDelayMs;
  const eventLoop: HealthCheck = pass
    ? { status: "pass", delayMs }
    : { status: "fail", delayMs, detail: `one turn of the event loop took ${delayMs} ms (more than ${opts.maxEventLoopDelayMs})` };
  return { status: eventLoop.status, checks: { eventLoop } };
}

/**
 * Readiness: whether this facade should get traffic. Checks that it is
 * started; that the event store answers a cheap read (its head position)
 * within `timeoutMs`; that every event handler is running or standing by
 * (another instance holds its lock), none stopped or failed; and that no
 * running handler lags more than `maxLag` positions behind the head. A failed
 * check says which, with the handlers' names and the error's code, never an
 * error's message (a driver's may name hosts or users).
 * @example
 * const report = await checkReadiness(facade, { maxLag: 100 });
 * if (report.status === "fail") console.warn(JSON.stringify(report.checks));
 */
export async function checkReadiness(subject: HealthSubject, options: HealthOptions = {}): Promise<HealthReport> {
  const opts = resolveHealthOptions(options);
  const facade: HealthCheck =
    subject.state === "started"
      ? { status: "pass", state: subject.state }
      : { status: "fail", state: subject.state, detail: `the facade is ${subject.state}, not started` };

  const t0 = performance.now();
  let storeHead: number | undefined;
  let eventStore: HealthCheck;
  try {
    storeHead = await withTimeout(subject.eventRepository.headPosition(), opts.timeoutMs);
    eventStore = { status: "pass", durationMs: round(performance.now() - t0), headPosition: storeHead };
  } catch (e) {
    const code = e instanceof TimedOut ? "TIMEOUT" : isMnemeError(e) ? e.code : "STORE_ERROR";
    eventStore = {
      status: "fail",
      durationMs: round(performance.now() - t0),
      error: code,
      detail:
        code === "TIMEOUT" ? `the event store did not answer within ${opts.timeoutMs} ms` : `the event store could not be read (${code})`,
    };
  }

  const handlers = subject.runtime.listEventHandlers();
  const down = handlers
    .filter((h) => h.state !== "running" && h.state !== "standby")
    .map((h) => ({ eventHandlerName: h.eventHandlerName, state: h.state }));
  const eventHandlers: HealthCheck =
    down.length === 0
      ? { status: "pass", count: handlers.length }
      : {
          status: "fail",
          count: handlers.length,
          notRunning: down,
          detail: `not running: ${down.map((h) => `${h.eventHandlerName} (${h.state})`).join(", ")}`,
        };

  const head = Math.max(storeHead ?? 0, subject.headPosition);
  const lagging = handlers
    .filter((h) => h.state === "running")
    .map((h) => ({ eventHandlerName: h.eventHandlerName, lag: Math.max(0, head - h.lastPosition) }))
    .filter((h) => h.lag > opts.maxLag);
  const lag: HealthCheck =
    lagging.length === 0
      ? { status: "pass", maxLag: opts.maxLag, headPosition: head }
      : {
          status: "fail",
          maxLag: opts.maxLag,
          headPosition: head,
          lagging,
          detail: `behind the head by more than ${opts.maxLag}: ${lagging.map((h) => `${h.eventHandlerName} (${h.lag})`).join(", ")}`,
        };

  const checks = { facade, eventStore, eventHandlers, lag };
  const status = Object.values(checks).every((c) => c.status === "pass") ? "pass" : "fail";
  return { status, checks };
}

/** The deadline passed: told apart from the store's own errors by identity. */
class TimedOut extends Error {}

async function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimedOut()), ms);
    (timer as { unref?: () => void }).unref?.();
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
    // A read that answers after the deadline is not waited for, and its failure is nobody's to report.
    work.catch(() => undefined);
  }
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

function positiveInt(name: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1)
    throw new MnemeError("INVALID_REQUEST", `health option ${name} must be a positive integer (got ${JSON.stringify(v)})`);
  return v;
}

function nonNegativeInt(name: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0)
    throw new MnemeError("INVALID_REQUEST", `health option ${name} must be a non-negative integer (got ${JSON.stringify(v)})`);
  return v;
}
