import { EventEmitter } from "eventemitter3";
import { MnemeError } from "../model/errors.js";
import { nowNs } from "../model/clock.js";
import type { SystemEventKind } from "../model/system-event-kind.js";
import { FAILURE_KINDS, FailureHistory } from "./failure-history.js";

/**
 * One system event. `id` is a safe integer, increasing within a producer and
 * unique across restarts and instances ("System events" in docs/runtime.md); `at`
 * is ns since the Unix epoch.
 */
export interface SystemEvent {
  id: number;
  kind: SystemEventKind;
  at: number;
  tenantUuid?: string;
  data: Record<string, unknown>;
}

/** A listener may be async: while its promise is pending, later events queue for it (bounded). */
export type SystemEventListener = (event: SystemEvent) => void | Promise<void>;

/**
 * Why a resume cannot continue exactly: the id is of another producer (a
 * previous run, another instance), older than the resume buffer, or of this
 * producer but never issued.
 */
export type SystemEventGapReason = "unknown-epoch" | "buffer-overflow" | "unknown-id";

/** What a resuming subscriber is told, before any event, when events may be missing between its `lastEventId` and what follows. */
export interface SystemEventGap {
  /** The id the subscriber resumed from. */
  readonly lastEventId: number;
  readonly reason: SystemEventGapReason;
  /** The delivery goes on with the buffered events after this id (an SSE stream sends it as the gap's `id:`). */
  readonly continuesAfter: number;
}

export interface SubscribeOptions {
  /**
   * Resume: replays the buffered events after this id first, then goes live.
   * When the id cannot be continued exactly (another epoch, older than the
   * buffer, never issued) `onGap` is called first and the whole buffer is
   * replayed. 0 means "from this producer's first event".
   */
  lastEventId?: number;
  /** Called once, before any event, when the `lastEventId` resume has a gap. */
  onGap?: (gap: SystemEventGap) => void;
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

/** Low bits of an id: the sequence within an epoch; the high bits are the epoch. */
const SEQUENCE_BITS = 22;
/** Largest epoch a producer draws at random (2^30); rollovers count up from it, and epoch x 2^22 stays below 2^53. */
const RANDOM_EPOCHS = 2 ** 30;

/** How system-event ids are made; the second constructor argument, for tests only. */
export interface SystemEventIdOptions {
  /** @internal The epoch to start with (default: random in 1..2^30). */
  readonly epoch?: number;
  /** @internal Bits of the sequence part (default 22): a small value makes an epoch rollover testable. */
  readonly sequenceBits?: number;
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
  // id = epoch * span + sequence. An epoch is drawn at random per producer, so ids of a previous run or of
  // another instance are recognisably not this producer's; when the sequence is used up, the next epoch follows.
  readonly #span: number;
  readonly #firstEpoch: number;
  #epoch: number;
  #sequence = 0;
  // The id of the last event that left the ring buffer: resuming from an older id has missed events.
  #evictedId: number | undefined;
  #running = false;
  // Events published while another is being emitted (e.g. SubscriberDropped from inside a delivery):
  // emitted after it, so every subscriber sees ids in increasing order.
  #emitting = false;
  readonly #pending: SystemEvent[] = [];
  /** The latest failures (failed commands, handler failures, failed restores), kept also while stopped. */
  readonly failures = new FailureHistory();

  constructor(opts: SystemEventProducerOptions = {}, ids: SystemEventIdOptions = {}) {
    const size = opts.bufferSize ?? 1000;
    if (!Number.isInteger(size) || size < 1) throw new MnemeError("INVALID_REQUEST", "bufferSize must be a positive integer");
    this.#ring = new Array<SystemEvent | undefined>(size);
    this.#maxQueue = opts.maxQueuePerSubscriber ?? 1000;
    const bits = ids.sequenceBits ?? SEQUENCE_BITS;
    if (!Number.isInteger(bits) || bits < 1 || bits > SEQUENCE_BITS)
      throw new MnemeError("INVALID_REQUEST", `sequenceBits must be an integer in 1..${SEQUENCE_BITS}`);
    this.#span = 2 ** bits;
    const epoch = ids.epoch ?? 1 + (crypto.getRandomValues(new Uint32Array(1))[0]! % RANDOM_EPOCHS);
    if (!Number.isInteger(epoch) || epoch < 1 || epoch > RANDOM_EPOCHS)
      throw new MnemeError("INVALID_REQUEST", `epoch must be an integer in 1..${RANDOM_EPOCHS}`);
    this.#firstEpoch = epoch;
    this.#epoch = epoch;
  }

  get running(): boolean {
    return this.#running;
  }

  /** Number of live subscribers. */
  get subscriberCount(): number {
    return this.#subscribers.size;
  }

  /**
   * The id of the last event published; before any, this producer's origin
   * (its first epoch x 2^22), from which a resume replays everything buffered.
   */
  get lastEventId(): number {
    return this.#epoch * this.#span + this.#sequence;
  }

  /**
   * The id after which everything still buffered follows: a resume from it
   * replays the whole buffer with no gap (the id of the last event evicted
   * from the buffer, else this producer's origin).
   */
  get replayStart(): number {
    return this.#evictedId ?? this.#firstEpoch * this.#span;
  }

  /** The epoch of the ids published now (the high part of an id: `Math.floor(id / 2 ** 22)`). */
  get epoch(): number {
    return this.#epoch;
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

  /** Publishes an event (dropped silently while stopped; a failure is kept in `failures` either way). */
  publish(kind: SystemEventKind, data: Record<string, unknown>, tenantUuid?: string): SystemEvent | undefined {
    if (FAILURE_KINDS.has(kind)) this.failures.add(kind, data, tenantUuid);
    if (!this.#running) return undefined;
    if (this.#sequence === this.#span - 1) {
      // The epoch's sequence is used up: the next epoch, so ids keep increasing.
      this.#epoch++;
      this.#sequence = 0;
    }
    const id = this.#epoch * this.#span + ++this.#sequence;
    const event: SystemEvent = tenantUuid ? { id, kind, at: nowNs(), tenantUuid, data } : { id, kind, at: nowNs(), data };
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
   * Subscribes; returns the unsubscribe function. SSE_PRODUCER_NOT_RUNNING while stopped;
   * INVALID_REQUEST for a `lastEventId` that is not a non-negative safe integer.
   * @example
   * const off = runtime.systemEvents.subscribe((e) => console.log(e.kind), {
   *   lastEventId, onGap: (g) => console.warn(`events may be missing after ${g.lastEventId}: ${g.reason}`),
   * });
   */
  subscribe(listener: SystemEventListener, opts: SubscribeOptions = {}): () => void {
    if (!this.#running)
      throw new MnemeError(
        "SSE_PRODUCER_NOT_RUNNING",
        "the system-event producer is not running: start it with runtime.systemEvents.start() or createFacade({ systemEvents: true })",
      );
    const sub: Subscriber = { listener, tenantUuid: opts.tenantUuid, queue: [], busy: false, closed: false, onClose: opts.onClose };
    if (opts.lastEventId !== undefined) {
      const gap = this.gapFor(opts.lastEventId);
      const after = gap === undefined ? opts.lastEventId : 0;
      if (gap !== undefined) {
        try {
          opts.onGap?.(gap);
        } catch {
          /* like a throwing listener: ignored */
        }
      }
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

  /** The buffered events after `lastEventId` (oldest first); all of them when `gapFor(lastEventId)` reports a gap. */
  replay(lastEventId = 0): SystemEvent[] {
    const after = this.gapFor(lastEventId) === undefined ? lastEventId : 0;
    const out: SystemEvent[] = [];
    for (let i = 0; i < this.#ringLen; i++) {
      const e = this.#ring[(this.#ringStart + i) % this.#ring.length]!;
      if (e.id > after) out.push(e);
    }
    return out;
  }

  /**
   * Whether a resume from `lastEventId` would miss nothing: `undefined` when
   * the buffered events after it are exactly what came after it, else the gap.
   * 0 stands for this producer's origin (before its first event).
   */
  gapFor(lastEventId: number): SystemEventGap | undefined {
    if (!Number.isSafeInteger(lastEventId) || lastEventId < 0) {
      throw new MnemeError("INVALID_REQUEST", `lastEventId must be a non-negative safe integer (got ${String(lastEventId)})`);
    }
    const origin = this.#firstEpoch * this.#span;
    const id = lastEventId === 0 ? origin : lastEventId;
    const epoch = Math.floor(id / this.#span);
    let reason: SystemEventGapReason | undefined;
    if (epoch < this.#firstEpoch || epoch > this.#epoch) reason = "unknown-epoch";
    else if (id > this.lastEventId) reason = "unknown-id";
    else if (this.#evictedId !== undefined && id < this.#evictedId) reason = "buffer-overflow";
    return reason === undefined ? undefined : { lastEventId, reason, continuesAfter: this.#evictedId ?? origin };
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
      this.#evictedId = this.#ring[this.#ringStart]!.id;
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
      r.then(
        () => this.#drain(sub),
        () => this.#drain(sub),
      );
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
