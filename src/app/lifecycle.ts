/**
 * The facade's lifecycle: start (stores initialised, evolve keys checked,
 * telemetry loaded, delivery subscribed, handlers restored and live, start
 * hooks), stop (delivery, handlers, the producer, the stores closed), and
 * the state every other path asserts.
 */
import { nowNs } from "../model/clock.js";
import { errorMessage, MnemeError } from "../model/errors.js";
import type { SystemEventKind } from "../model/system-event-kind.js";
import { loadTelemetry, type Telemetry } from "../observability/telemetry.js";
import type { SystemEventProducer } from "../runtime/system-events.js";
import type { LogStore } from "../store/log-store.js";
import type { DomainRegistry } from "./domain-registry.js";
import type { StartWarning } from "./privacy-write.js";
import type { ReadmodelRegistry } from "./readmodel-registry.js";
import { checkTimerMs } from "./request-input.js";
import type { FacadeEventRepository } from "./event-view.js";

export type FacadeState = "new" | "starting" | "started" | "stopping" | "stopped";

/** Anything that can be closed and initialised. */
export interface Lifecycle {
  init(): Promise<void>;
  close(): Promise<void>;
}

/** What start and stop need of the facade (`F`: the facade, as start hooks get it). */
export interface LifecycleHost<F> {
  readonly self: F;
  readonly options: {
    readonly systemEvents?: unknown;
    readonly telemetry?: boolean;
    readonly start?: { readonly waitForStandby?: number };
    readonly close?: () => Promise<void> | void;
  };
  readonly domains: DomainRegistry;
  readonly readmodels: ReadmodelRegistry;
  readonly eventRepository: FacadeEventRepository;
  readonly systemEvents: SystemEventProducer;
  readonly logStore: LogStore;
  /** Every store once (the facade's and the readmodels' own backends). */
  stores(): Lifecycle[];
  /** Reads what the stores are (the Runtime's store info), once they are open. */
  storeInfo(): Promise<unknown>;
  /** The start-up check for personal data stored in clear (docs/upgrading.md), once the stores are open. */
  checkStoredPersonalData(): Promise<void>;
  /** Waits for the aggregate loads in flight. */
  drainLoads(): Promise<void>;
  publish(kind: SystemEventKind, data: Record<string, unknown>): void;
}

export class FacadeLifecycle<F> {
  #state: FacadeState = "new";
  #unsubscribe: (() => void)[] = [];
  #pushesLocally = false;
  #startPromise: Promise<void> | undefined;
  #stopPromise: Promise<void> | undefined;
  /** Loaded at start when @opentelemetry/api is installed: undefined is the whole cost otherwise. */
  #telemetry: Telemetry | undefined;
  readonly #startHooks: ((facade: F) => Promise<void> | void)[] = [];
  /** Warnings of registration, written to the log store once it is open. */
  readonly startWarnings: StartWarning[] = [];
  startedAt = 0;

  constructor(readonly host: LifecycleHost<F>) {}

  get state(): FacadeState {
    return this.#state;
  }

  get telemetry(): Telemetry | undefined {
    return this.#telemetry;
  }

  /** True when the event repository tells the handlers of appends itself (onAppend). */
  get pushesLocally(): boolean {
    return this.#pushesLocally;
  }

  /** True once stop() began: nothing more registers. */
  get stopped(): boolean {
    return this.#state === "stopping" || this.#state === "stopped";
  }

  onStart(hook: (facade: F) => Promise<void> | void): void {
    this.#startHooks.push(hook);
  }

  assertStarted(): void {
    if (this.#state !== "started") {
      throw new MnemeError(
        "NOT_STARTED",
        this.#state === "new" || this.#state === "starting"
          ? "the facade is not started: await facade.start() first"
          : "the facade is stopped",
      );
    }
  }

  start(): Promise<void> {
    if (this.stopped) return Promise.reject(new MnemeError("INVALID_STATE", "a stopped facade cannot start again: create a new one"));
    if (this.#startPromise !== undefined) return this.#startPromise;
    if (this.#state !== "new") return Promise.reject(new MnemeError("INVALID_STATE", `the facade cannot start when ${this.#state}`));
    this.#startPromise = this.#start();
    return this.#startPromise;
  }

  async #start(): Promise<void> {
    const host = this.host;
    this.#state = "starting";
    try {
      const waitForStandby = checkTimerMs(host.options.start?.waitForStandby ?? 0, "start.waitForStandby");
      host.domains.checkPendingEvolveKeys();
      for (const s of host.stores()) await s.init();
      if (host.options.systemEvents) host.systemEvents.start();
      host.readmodels.noteHead(await host.eventRepository.headPosition());
      await this.#openTelemetry();
      await host.storeInfo();
      await host.checkStoredPersonalData();
      for (const w of this.startWarnings.splice(0)) {
        await host.logStore.append({ level: "warn", source: "mneme.privacy", message: w.message, data: w.data }).catch(() => undefined);
      }
      this.#subscribe();
      this.startedAt = nowNs();
      this.#state = "started";
      await host.readmodels.goLive();
      await this.#reportStandby(waitForStandby);
      for (const hook of this.#startHooks) await hook(host.self);
    } catch (err) {
      this.#state = "new";
      this.#startPromise = undefined;
      for (const u of this.#unsubscribe.splice(0)) u();
      throw err;
    }
  }

  async #openTelemetry(): Promise<void> {
    const registry = this.host.readmodels;
    this.#telemetry ??= await loadTelemetry(this.host.options.telemetry !== false);
    // Handlers in standby are processed by another instance: their position here says nothing.
    this.#telemetry?.observeLag(() =>
      [...registry.handlers.values()]
        .filter((h) => h.state !== "standby")
        .map((h) => ({ handler: h.name, lag: Math.max(0, registry.head - h.lastPosition) })),
    );
  }

  /** Live delivery: appends in this process (onAppend) and elsewhere (onExternalAppend) to every handler. */
  #subscribe(): void {
    const repo = this.host.eventRepository;
    const registry = this.host.readmodels;
    if (repo.capabilities.appendListeners) {
      this.#pushesLocally = true;
      this.#unsubscribe.push(repo.onAppend((events) => registry.deliver(events)));
    }
    if (repo.capabilities.externalAppends) this.#unsubscribe.push(repo.onExternalAppend(() => registry.deliver(null)));
  }

  /** Handlers left in standby (another instance holds their lock): waited for when asked, the rest reported. */
  async #reportStandby(waitForStandby: number): Promise<void> {
    const registry = this.host.readmodels;
    if (waitForStandby > 0) await registry.untilOutOfStandby(waitForStandby);
    const standby = registry.inStandby();
    if (standby.length === 0) return;
    this.host.publish("HandlersInStandby", { eventHandlerNames: standby, waitedMs: waitForStandby });
    await this.host.logStore
      .append({
        level: "warn",
        source: "mneme.start",
        message: `started with event handlers in standby (another instance holds their processing lock; this one takes over when it frees): ${standby.join(", ")}`,
        data: { eventHandlerNames: standby, waitedMs: waitForStandby },
      })
      .catch(() => undefined);
  }

  stop(): Promise<void> {
    if (this.#stopPromise !== undefined) return this.#stopPromise;
    this.#stopPromise = this.#stop();
    return this.#stopPromise;
  }

  async #stop(): Promise<void> {
    const host = this.host;
    if (this.#startPromise !== undefined) await this.#startPromise.catch(() => undefined);
    const wasStarted = this.#state === "started";
    this.#state = "stopping";
    for (const u of this.#unsubscribe.splice(0)) u();
    this.#telemetry?.close();
    if (wasStarted) await host.readmodels.stopAll();
    host.systemEvents.stop();
    await host.drainLoads();
    const errors: unknown[] = [];
    for (const s of host.stores()) {
      try {
        await s.close();
      } catch (e) {
        errors.push(e);
      }
    }
    try {
      await host.options.close?.();
    } catch (e) {
      errors.push(e);
    }
    this.#state = "stopped";
    if (errors.length > 0)
      throw new MnemeError("STORE_ERROR", `stopping the facade: ${errors.map(errorMessage).join("; ")}`, { cause: errors[0] });
  }
}
