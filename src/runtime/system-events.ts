import { EventEmitter } from "eventemitter3";
import { MnemeError } from "../core/errors.js";
import { nowNs } from "../core/clock.js";

/** Kinds of system events. docs/runtime.md describes each payload. */
export type SystemEventKind =
  | "CommandExecuted"
  | "CommandFailed"
  | "EventsAppended"
  | "EventHandlerStateChanged"
  | "RestoreStarted"
  | "RestoreProgress"
  | "RestoreCompleted"
  | "RestoreFailed"
  | "HandlerFailed"
  | "StoreEntryChanged"
  | "SubscriberDropped";

/** One system event. `id` is monotonic per producer; `at` is ns since the epoch. */
export interface SystemEvent {
  id: number;
  kind: SystemEventKind;
  at: number;
  tenantUuid?: string;
  data: Record<string, unknown>;
}

/** A listener may be async: while its promise is pending, later events queue for it (bounded). */
export type SystemEventListener = (event: SystemEvent) => void | Promise<void>;

export interface SubscribeOptions {
  /** Replays buffered events with a greater id first (resume after a reconnect). An id newer than any issued (from a previous run) replays the whole buffer. */
  lastEventId?: number;
  /** Only events of this tenant (system-wide events have none and are not shown). Absent: every event (system administrators). */
  tenantUuid?: string;
  /** Called once when the subscriber is dropped for falling behind, or when the producer stops. */
  onClose?: (reason: "slow" | "stopped") => void;
}

export interface SystemEventProducerOptions {
  /** Events kept for resume. Default 1000. */
  bufferSize?: number;
  /** Events queued for one slow (async) subscriber before it is dropped. Default 1000. */
  maxQueuePerSubscriber?: number;
}

const ALL = "*";
const TENANT = "t:";

interface Subscriber {
  listener: SystemEventListener;
  tenantUuid: string | undefined;
  queue: SystemEvent[];
  busy: boolean;
  closed: boolean;
  onClose: ((reason: "slow" | "stopped") => void) | undefined;
}

/**
 * The producer behind the SSE stream: publishes system events to subscribers,
 * keeps a bounded ring buffer for resume, and drops subscribers that fall
 * behind instead of growing memory.
 */
export class SystemEventProducer {
  // One channel for unfiltered subscribers ("*") and one per tenant ("t:<tenantUuid>"), so a publish only
  // reaches the subscribers that can see it instead of every subscriber filtering every event.
  readonly #emitter = new EventEmitter<Record<string, [SystemEvent]>>();
  readonly #ring: (SystemEvent | undefined)[];
  readonly #maxQueue: number;
  readonly #subscribers = new Set<Subscriber>();
  #ringStart = 0;
  #ringLen = 0;
  #nextId = 1;
  #running = false;
  // Events published while another is being emitted (e.g. SubscriberDropped from inside a delivery):
  // emitted after it, so every subscriber sees ids in increasing order.
  #emitting = false;
  readonly #pending: SystemEvent[] = [];

  constructor(opts: SystemEventProducerOptions = {}) {
    const size = opts.bufferSize ?? 1000;
    if (!Number.isInteger(size) || size < 1) throw new MnemeError("INVALID_REQUEST", "bufferSize must be a positive integer");
    this.#ring = new Array<SystemEvent | undefined>(size);
    this.#maxQueue = opts.maxQueuePerSubscriber ?? 1000;
  }

  get running(): boolean {
    return this.#running;
  }

  /** Number of live subscribers. */
  get subscriberCount(): number {
    return this.#subscribers.size;
  }

  /** The id the next event gets minus one (0 before any event). */
  get lastEventId(): number {
    return this.#nextId - 1;
  }

  start(): void {
    this.#running = true;
  }

  /** Stops publishing and closes every subscriber. Idempotent. */
  stop(): void {
    if (!this.#running) return;
    this.#running = false;
    for (const s of [...this.#subscribers]) this.#close(s, "stopped");
  }

  /** True when publishing would reach someone or the resume buffer: callers skip building payloads otherwise. */
  get active(): boolean {
    return this.#running;
  }

  /** Publishes an event (dropped silently while stopped). */
  publish(kind: SystemEventKind, data: Record<string, unknown>, tenantUuid?: string): SystemEvent | undefined {
    if (!this.#running) return undefined;
    const event: SystemEvent = tenantUuid ? { id: this.#nextId++, kind, at: nowNs(), tenantUuid, data } : { id: this.#nextId++, kind, at: nowNs(), data };
    if (this.#emitting) {
      this.#pending.push(event);
      return event;
    }
    this.#emitting = true;
    try {
      this.#emit(event);
      while (this.#pending.length > 0) this.#emit(this.#pending.shift()!);
    } finally {
      this.#emitting = false;
    }
    return event;
  }

  /**
   * Subscribes; returns the unsubscribe function. SSE_PRODUCER_NOT_RUNNING while stopped.
   * @example
   * const off = runtime.systemEvents.subscribe((e) => console.log(e.kind), { lastEventId: 41 });
   */
  subscribe(listener: SystemEventListener, opts: SubscribeOptions = {}): () => void {
    if (!this.#running) throw new MnemeError("SSE_PRODUCER_NOT_RUNNING", "the system-event producer is not running: start it with runtime.systemEvents.start() or createFacade({ systemEvents: true })");
    const sub: Subscriber = { listener, tenantUuid: opts.tenantUuid, queue: [], busy: false, closed: false, onClose: opts.onClose };
    if (opts.lastEventId !== undefined) {
      const after = this.#resumeAfter(opts.lastEventId);
      for (let i = 0; i < this.#ringLen; i++) {
        const e = this.#ring[(this.#ringStart + i) % this.#ring.length]!;
        if (e.id > after) this.#offer(sub, e);
      }
      // Dropped while replaying (more buffered events than its queue holds): never registered.
      if (sub.closed) return () => undefined;
    }
    // Live events arrive on the subscriber's own channel (already tenant-filtered): an idle subscriber gets them directly.
    const onEvent = (e: SystemEvent) => (sub.busy || sub.closed ? this.#offer(sub, e) : this.#deliver(sub, e));
    const channel = opts.tenantUuid === undefined ? ALL : TENANT + opts.tenantUuid;
    this.#emitter.on(channel, onEvent);
    this.#subscribers.add(sub);
    (sub as Subscriber & { off?: () => void }).off = () => this.#emitter.off(channel, onEvent);
    return () => this.#close(sub, undefined);
  }

  /** The buffered events after `lastEventId` (oldest first); all of them for an id this producer never issued. */
  replay(lastEventId = 0): SystemEvent[] {
    lastEventId = this.#resumeAfter(lastEventId);
    const out: SystemEvent[] = [];
    for (let i = 0; i < this.#ringLen; i++) {
      const e = this.#ring[(this.#ringStart + i) % this.#ring.length]!;
      if (e.id > lastEventId) out.push(e);
    }
    return out;
  }

  /**
   * Ids restart at 1 when the process restarts, and a reconnecting client (an EventSource
   * sends its Last-Event-ID by itself) may carry an id of the previous run: one newer than
   * anything issued here means "from before this run", so everything buffered is new to it.
   */
  #resumeAfter(lastEventId: number): number {
    return lastEventId > this.#nextId - 1 ? 0 : lastEventId;
  }

  #emit(e: SystemEvent): void {
    this.#push(e);
    this.#emitter.emit(ALL, e);
    if (e.tenantUuid !== undefined) this.#emitter.emit(TENANT + e.tenantUuid, e);
  }

  #push(e: SystemEvent): void {
    const size = this.#ring.length;
    if (this.#ringLen < size) {
      this.#ring[(this.#ringStart + this.#ringLen) % size] = e;
      this.#ringLen++;
    } else {
      this.#ring[this.#ringStart] = e;
      this.#ringStart = (this.#ringStart + 1) % size;
    }
  }

  #offer(sub: Subscriber, e: SystemEvent): void {
    if (sub.closed) return;
    if (sub.tenantUuid !== undefined && e.tenantUuid !== sub.tenantUuid) return;
    if (sub.busy) {
      if (sub.queue.length >= this.#maxQueue) {
        this.#close(sub, "slow");
        return;
      }
      sub.queue.push(e);
      return;
    }
    this.#deliver(sub, e);
  }

  #deliver(sub: Subscriber, e: SystemEvent): void {
    let r: void | Promise<void>;
    try {
      r = sub.listener(e);
    } catch {
      return; // a throwing listener must not break the producer or other subscribers
    }
    if (r instanceof Promise) {
      sub.busy = true;
      r.then(() => this.#drain(sub), () => this.#drain(sub));
    }
  }

  #drain(sub: Subscriber): void {
    sub.busy = false;
    while (!sub.closed && !sub.busy && sub.queue.length > 0) this.#deliver(sub, sub.queue.shift()!);
  }

  #close(sub: Subscriber, reason: "slow" | "stopped" | undefined): void {
    if (sub.closed) return;
    sub.closed = true;
    sub.queue.length = 0;
    (sub as Subscriber & { off?: () => void }).off?.();
    this.#subscribers.delete(sub);
    if (reason === "slow") this.publish("SubscriberDropped", { reason: "slow", maxQueue: this.#maxQueue });
    if (reason !== undefined) {
      try {
        sub.onClose?.(reason);
      } catch {
        /* the subscriber's own cleanup failing must not affect the producer */
      }
    }
  }
}
