import type { Event } from "../model/types.js";
import type { EventRepository } from "../store/event-repository.js";

/** One live subscriber of the tail: given every page the tail reads, in position order. */
export interface TailSubscriber {
  /** Events read after the subscriber joined (all of them: the subscriber filters). */
  deliver(events: readonly Event[]): void;
  /** The tail could not read the store: the subscriber ends (its client resumes from its last id). */
  fail(error: unknown): void;
}

/**
 * The one reader of new events behind every event subscription of a facade:
 * woken by the store's notices (`onAppend` of this instance, `onExternalAppend`
 * of others), it reads the store after its position once and hands each page
 * to every live subscriber. So 1,000 subscribers cost one store read per
 * wake-up, not 1,000. Reading the store (not taking the notice's events) keeps
 * the order and completeness of `readAll`: positions in order, never past an
 * append that has not committed. The tail runs while someone subscribes.
 */
export class EventTail {
  readonly #repo: EventRepository;
  readonly #subscribers = new Set<TailSubscriber>();
  #position = 0;
  #started: Promise<void> | undefined;
  #stopListening: (() => void)[] = [];
  #pulling = false;
  #again = false;
  #pollTimer: ReturnType<typeof setInterval> | undefined;
  // The fan-out waiting for its turn (see fanOutWritesPerSecond), and when the last one was.
  #lingerTimer: ReturnType<typeof setTimeout> | undefined;
  #lastFanOut = -Infinity;
  // Counts starts and stops: a read begun before a stop hands nothing out after it.
  #generation = 0;

  /**
   * @param pollMs how often the tail also reads without a notice (a store without notices, a notice lost).
   * @param fanOutWritesPerSecond the socket writes per second the fan-out aims to stay under: with `n`
   * subscribers, a page is handed out at most every `n / fanOutWritesPerSecond` s (1,000 subscribers:
   * every 20 ms; 50 or fewer: at once), what comes meanwhile going out with it. A write per subscriber
   * is the fan-out's cost (a system call each); fewer, larger ones keep a busy server from falling
   * behind, for a wait of at most that interval.
   */
  constructor(
    repo: EventRepository,
    readonly pollMs = 1000,
    readonly fanOutWritesPerSecond = 50_000,
  ) {
    this.#repo = repo;
  }

  /** The position up to which every event was handed to the live subscribers. */
  get position(): number {
    return this.#position;
  }

  get subscriberCount(): number {
    return this.#subscribers.size;
  }

  /** Starts the tail at the store's head (once; again after it stopped). */
  ensureStarted(): Promise<void> {
    this.#started ??= this.#start().catch((e: unknown) => {
      this.#started = undefined;
      throw e;
    });
    return this.#started;
  }

  async #start(): Promise<void> {
    const gen = ++this.#generation;
    const head = await this.#repo.headPosition();
    if (gen !== this.#generation) return;
    this.#position = head;
    const wake = () => this.#wake();
    const offAppend = this.#repo.onAppend?.(wake);
    const offExternal = this.#repo.onExternalAppend?.(wake);
    this.#stopListening = [offAppend, offExternal].filter((f) => f !== undefined);
    this.#pollTimer = setInterval(wake, this.pollMs);
    (this.#pollTimer as { unref?: () => void }).unref?.();
    // Anything appended between reading the head and listening is read now.
    wake();
  }

  /**
   * Adds a live subscriber that has seen everything up to `position`; false
   * when the tail is not running or has moved past it (the caller reads the
   * store up to `tail.position` and tries again). Synchronous, so no page can
   * be handed out between the check and the join. A subscriber ahead of the
   * tail (it resumed from a position the tail has not read yet) joins at once
   * and skips what it has seen.
   */
  join(subscriber: TailSubscriber, position: number): boolean {
    if (this.#started === undefined || position < this.#position) return false;
    this.#subscribers.add(subscriber);
    return true;
  }

  /** Removes a subscriber (joined or still catching up); the last one stops the tail until the next comes. */
  leave(subscriber: TailSubscriber): void {
    this.#subscribers.delete(subscriber);
    // Nobody left: stop reading (a subscriber still catching up starts it again, from the head, and reads up to it).
    if (this.#subscribers.size === 0 && this.#started !== undefined) this.#stop();
  }

  #stop(): void {
    for (const off of this.#stopListening) off();
    this.#stopListening = [];
    if (this.#pollTimer !== undefined) clearInterval(this.#pollTimer);
    this.#pollTimer = undefined;
    if (this.#lingerTimer !== undefined) clearTimeout(this.#lingerTimer);
    this.#lingerTimer = undefined;
    this.#started = undefined;
    this.#generation++;
  }

  /** Reads now, or once the interval since the last fan-out has passed (one timer for the tail, whatever the subscribers). */
  #wake(): void {
    if (this.#lingerTimer !== undefined) return;
    const wait = this.#lastFanOut + (this.#subscribers.size / this.fanOutWritesPerSecond) * 1000 - performance.now();
    if (wait < 1) {
      void this.#pull();
      return;
    }
    this.#lingerTimer = setTimeout(() => {
      this.#lingerTimer = undefined;
      void this.#pull();
    }, wait);
  }

  /** Reads after the position; a wake-up while reading reads again after (one reader at a time). */
  async #pull(): Promise<void> {
    if (this.#pulling) {
      this.#again = true;
      return;
    }
    this.#pulling = true;
    const gen = this.#generation;
    try {
      do {
        this.#again = false;
        for await (const page of this.#repo.readAll({ afterPosition: this.#position })) {
          if (gen !== this.#generation) return;
          const fresh =
            page[0] !== undefined && page[0].position <= this.#position ? page.filter((e) => e.position > this.#position) : page;
          if (fresh.length === 0) continue;
          // Position and hand-out in one synchronous step: a subscriber joining between pages sees exactly what follows.
          this.#position = fresh[fresh.length - 1]!.position;
          this.#lastFanOut = performance.now();
          for (const s of [...this.#subscribers]) s.deliver(fresh);
        }
      } while (this.#again && gen === this.#generation);
    } catch (e) {
      if (gen !== this.#generation) return;
      for (const s of [...this.#subscribers]) {
        this.#subscribers.delete(s);
        s.fail(e);
      }
      this.#stop();
    } finally {
      this.#pulling = false;
      // A start came while this read ran: the new run reads now.
      if (gen !== this.#generation && this.#started !== undefined) void this.#pull();
    }
  }
}
