import { errorMessage, isMnemeError, MnemeError } from "../model/errors.js";
import type { Event } from "../model/types.js";
import type { EventHandlerState, RestoreReport } from "../model/event-handler.js";
import type { LeasedReadmodelStoreBackend } from "../store/leased-readmodel-backend.js";
import {
  clearNextGeneration,
  nextGenerationCheckpoint,
  supportsGenerations,
  switchGenerations,
  type CollectionReplacing,
} from "./readmodel-generations.js";
import type { RunnerState } from "./runner-state.js";
import { inReadmodelBatch } from "./tenant-scope.js";
import type { RunnerLocks } from "./runner-locks.js";
import type { RunnerDelivery } from "./runner-delivery.js";

/**
 * The runner's part that restores: a replay of the store from the checkpoint
 * or from zero (blue-green: into the next generation beside the served one,
 * switched in one transaction when complete; in place on a backend that
 * cannot switch), with the hand-off of the live events caught meanwhile, each
 * applied once. Its state is the runner's.
 * @internal
 */
export class RunnerRestore {
  readonly #s: RunnerState;
  readonly #locks: RunnerLocks;
  readonly #delivery: RunnerDelivery;

  constructor(state: RunnerState, locks: RunnerLocks, delivery: RunnerDelivery) {
    this.#s = state;
    this.#locks = locks;
    this.#delivery = delivery;
  }

  /**
   * Rebuilds state from the event store: from zero (after `resetState`) or
   * from the checkpoint. Live events that arrive meanwhile are caught and
   * applied after the replay, each exactly once.
   */
  start(opts: { fromZero?: boolean; signal?: AbortSignal } = {}): { done: Promise<RestoreReport>; cancel(): void } {
    const s = this.#s;
    const running = s.restore;
    if (running?.catchUp === true && !s.resuming) {
      // The runner's own catch-up from the checkpoint (a start or a takeover) is no operator's restore: the one
      // asked for follows it, rather than being refused while the handler is listed as running.
      const next = running.done.then(
        () => this.start(opts).done,
        () => this.start(opts).done,
      );
      next.catch(() => undefined);
      return { done: next, cancel: () => running.controller.abort() };
    }
    if (running !== undefined) {
      const done = Promise.reject(new MnemeError("INVALID_STATE", `event handler ${s.name} is restoring already`));
      done.catch(() => undefined);
      return { done, cancel: () => undefined };
    }
    const controller = new AbortController();
    if (opts.signal !== undefined) {
      if (opts.signal.aborted) controller.abort();
      else opts.signal.addEventListener("abort", () => controller.abort(), { once: true });
    }
    const run = () => this.#run(opts.fromZero === true, controller.signal);
    const telemetry = s.host?.telemetry?.();
    const done = (telemetry === undefined ? run() : telemetry.restore(s.name, opts.fromZero === true, run)).finally(() => {
      s.restore = undefined;
    });
    s.restore = { controller, done, catchUp: s.resuming };
    done.catch(() => undefined);
    return { done, cancel: () => controller.abort() };
  }

  async #run(fromZero: boolean, signal: AbortSignal): Promise<RestoreReport> {
    const s = this.#s;
    const host = s.requireHost();
    const backend = s.backend();
    const caughtBefore = await this.#begin();
    const t0 = performance.now();
    s.restorationState = "restoring";
    s.setState("running");
    let replayed = 0;
    try {
      await this.#prepare(fromZero, backend);
      s.persistedPosition = s.lastPosition;
      const afterPosition = s.lastPosition;
      host.publish("RestoreStarted", { eventHandlerName: s.name, fromZero, afterPosition });
      replayed += await this.#replayFromStore(signal, replayed);
      if (s.rebuild !== undefined) s.rebuild.phase = "catching-up";
      replayed = await this.#handOff(signal, replayed, backend);
      if (signal.aborted) throw new MnemeError("RESTORE_CANCELLED", `restoration of ${s.name} was cancelled at position ${s.lastPosition}`);
      s.catching = false;
      s.restorationState = "restored";
      const durationMs = performance.now() - t0;
      const report: RestoreReport = {
        eventsReplayed: replayed,
        eventsCaught: s.metrics.eventsCaught - caughtBefore,
        durationMs,
        eventsPerSecond: durationMs > 0 ? (replayed / durationMs) * 1000 : replayed,
        afterPosition,
        toPosition: s.lastPosition,
      };
      s.metrics.lastRestore = report;
      host.noteHead(s.lastPosition);
      host.publish("RestoreCompleted", { eventHandlerName: s.name, ...report });
      s.wake();
      // anything that was pushed after the switch is queued normally from now on
      return report;
    } catch (err) {
      throw await this.#failed(err, signal, backend);
    }
  }

  /** Live events are caught from now on, and the lock is taken; returns the count of caught events before. */
  async #begin(): Promise<number> {
    const s = this.#s;
    const name = s.name;
    if (s.state === "standby") {
      throw new MnemeError("INVALID_STATE", `event handler ${name} is processed by another instance (standby): it cannot be restored here`);
    }
    // From here on live events are caught, not applied (set before any await, so none slips through).
    s.catching = true;
    s.catchOverflow = false;
    s.catchPull = false;
    s.caught = [];
    const caughtBefore = s.metrics.eventsCaught;
    // tryLock may fail (UNAVAILABLE): live events must not stay caught then.
    if (
      !(await this.#locks.takeLock().catch((e: unknown) => {
        s.stopCatching();
        throw e;
      }))
    ) {
      s.stopCatching();
      throw new MnemeError("INVALID_STATE", `event handler ${name} is processed by another instance: it cannot be restored here`);
    }
    s.queue.clear();
    await this.#delivery.idle();
    return caughtBefore;
  }

  /** Where the replay starts: a fresh next generation (blue-green), the cleared collections (in place), or the checkpoint. */
  async #prepare(fromZero: boolean, backend: LeasedReadmodelStoreBackend): Promise<void> {
    const s = this.#s;
    const name = s.name;
    if (fromZero && supportsGenerations(backend)) {
      // Blue-green: the next generation is built beside the served one, which queries keep reading.
      const served = await backend.getCheckpoint(s.key);
      const servedTimestamp = await s.timestampAt(served);
      const targetHead = await s.requireHost().eventRepository.headPosition();
      // Emptied first (a generation left by a crash or a failed rebuild included), in one transaction with its checkpoint.
      await inReadmodelBatch(name, () =>
        this.#locks.fencedTransaction(backend, s.token, async () => {
          await s.hooks.resetState();
          await backend.setCheckpoint(nextGenerationCheckpoint(name), 0);
        }),
      );
      s.rebuild = { phase: "rebuilding", servedPosition: served, servedTimestamp, targetHead, startedAt: performance.now(), replayed: 0 };
      s.lastPosition = 0;
      s.lastEventTimestamp = 0;
    } else if (fromZero) {
      // A backend that cannot switch generations restores in place. One backend transaction: a crash
      // or an error never leaves the collections cleared at the old checkpoint.
      await this.#locks.fencedTransaction(backend, s.token, async () => {
        await s.hooks.resetState();
        for (const key of s.partition?.whole?.keys ?? [s.key]) await backend.setCheckpoint(key, 0);
      });
      s.lastPosition = 0;
      s.lastEventTimestamp = 0;
    } else {
      await this.#discardLeftoverGeneration(backend);
      const checkpoint = await backend.getCheckpoint(s.key);
      const at = await s.timestampAt(checkpoint);
      s.lastPosition = checkpoint;
      s.lastEventTimestamp = at;
    }
  }

  /** Hand-off: apply what was caught, in position order, each once; repeat until nothing new. Returns `replayed`, raised. */
  async #handOff(signal: AbortSignal, replayed: number, backend: LeasedReadmodelStoreBackend): Promise<number> {
    const s = this.#s;
    let cursor = 0;
    for (;;) {
      if (signal.aborted) break;
      if (s.catchOverflow || s.catchPull) {
        s.catchOverflow = false;
        s.catchPull = false;
        s.caught = [];
        cursor = 0;
        replayed += await this.#replayFromStore(signal, replayed);
        continue;
      }
      if (cursor >= s.caught.length) {
        if (s.rebuild === undefined) break; // nothing new: go live (no await between check and switch)
        // The new generation is complete: serve it. What is caught during the switch is applied to it next.
        await this.#switchGeneration(backend as LeasedReadmodelStoreBackend & CollectionReplacing);
        continue;
      }
      const pending = s.caught.slice(cursor).sort((a, b) => a.position - b.position);
      cursor = s.caught.length;
      const fresh = pending.filter((e) => e.position > s.lastPosition);
      if (fresh.length === 0) continue;
      if (fresh[0]!.position !== s.lastPosition + 1 || !contiguous(fresh)) {
        s.catchPull = true; // a gap: the store is the truth
        continue;
      }
      await this.#delivery.apply(fresh, true);
    }
    return replayed;
  }

  /** A restoration failed, was cancelled or lost the lock: sets the states, publishes RestoreFailed, returns what to throw. */
  async #failed(err: unknown, signal: AbortSignal, backend: LeasedReadmodelStoreBackend): Promise<unknown> {
    const s = this.#s;
    const host = s.requireHost();
    const name = s.name;
    // Still catching: no live event reaches the served generation before it is back in charge.
    // The position the restoration reached (a rebuild's, before the served generation takes over again).
    const reached = s.lastPosition;
    await this.#abandonRebuild(backend);
    s.stopCatching();
    s.caught = s.caught.slice();
    if ((s.state as EventHandlerState) === "standby") {
      // The lock was lost mid-restore: the standby retry takes the handler back (and restores it) later.
      s.restorationState = "cancelled";
      host.publish("RestoreFailed", { eventHandlerName: name, cancelled: true, lockLost: true, position: reached });
      return new MnemeError(
        "RESTORE_CANCELLED",
        `restoration of ${name} stopped at position ${reached}: another instance took its processing lock`,
      );
    }
    if (isMnemeError(err, "RESTORE_CANCELLED") || signal.aborted) {
      s.restorationState = "cancelled";
      await this.#locks.persistCheckpoint().catch(() => undefined);
      s.setState("stopped");
      host.publish("RestoreFailed", { eventHandlerName: name, cancelled: true, position: reached });
      return isMnemeError(err, "RESTORE_CANCELLED")
        ? err
        : new MnemeError("RESTORE_CANCELLED", `restoration of ${name} was cancelled at position ${reached}`);
    }
    s.restorationState = "failed";
    // UNAVAILABLE (the database could not be reached): the handler stays running and catches up
    // from the checkpoint after a backoff (restored again then); any other error fails it.
    const unavailable = this.#delivery.retryLater(err);
    if (unavailable === undefined) this.#delivery.fail(err);
    host.publish(
      "RestoreFailed",
      {
        eventHandlerName: name,
        cancelled: false,
        error: s.metrics.lastError ?? errorMessage(err),
        position: reached,
        // The error text may carry the failing event's payload: its tenant's stream only (and all-tenant ones).
      },
      s.metrics.lastErrorTenantUuid || undefined,
    );
    return unavailable ?? s.failure ?? err;
  }

  /**
   * The switch of a rebuild: one backend transaction replaces the served
   * collections with the new generation's and moves the served checkpoint to
   * where the new generation is.
   */
  async #switchGeneration(backend: LeasedReadmodelStoreBackend & CollectionReplacing): Promise<void> {
    const s = this.#s;
    const rebuild = s.rebuild;
    if (rebuild === undefined) return;
    const name = s.name;
    rebuild.phase = "switching";
    const position = s.lastPosition;
    await this.#locks.fencedTransaction(backend, s.token, async () => {
      await switchGenerations(backend, name);
      await backend.setCheckpoint(nextGenerationCheckpoint(name), 0);
      await this.#switchCheckpoints(backend, position);
    });
    s.rebuild = undefined;
    // Every partition's checkpoint is at the switch now: from here this lane applies its own partition only.
    if (s.partition !== undefined) s.partition.whole = undefined;
    s.persistedPosition = position;
    s.wake();
  }

  /** The served checkpoint(s) at the switch: this handler's, or every partition's with the partition count. */
  async #switchCheckpoints(backend: LeasedReadmodelStoreBackend, position: number): Promise<void> {
    const whole = this.#s.partition?.whole;
    if (whole === undefined) return backend.setCheckpoint(this.#s.key, position);
    for (const key of whole.keys) await backend.setCheckpoint(key, position);
    await backend.setCheckpoint(whole.countKey, whole.keys.length);
  }

  /**
   * A rebuild stopped before its switch (cancelled, failed, lock lost): the
   * served generation stays in charge, at its checkpoint, and the partial one
   * is discarded (best effort: what is left is discarded at the next start or rebuild).
   */
  async #abandonRebuild(backend: LeasedReadmodelStoreBackend): Promise<void> {
    const s = this.#s;
    const rebuild = s.rebuild;
    if (rebuild === undefined) return;
    s.rebuild = undefined;
    s.lastPosition = rebuild.servedPosition;
    s.lastEventTimestamp = rebuild.servedTimestamp;
    s.persistedPosition = rebuild.servedPosition;
    // Without the lock the next generation may be another instance's rebuild by now.
    if (!s.lockHeld) return;
    await this.#discardNextGeneration(backend).catch(() => undefined);
  }

  /** At a start: a next generation left by a crash (its checkpoint is past 0) is discarded, not resumed. */
  async #discardLeftoverGeneration(backend: LeasedReadmodelStoreBackend): Promise<void> {
    if (!supportsGenerations(backend)) return;
    if ((await backend.getCheckpoint(nextGenerationCheckpoint(this.#s.name))) === 0) return;
    await this.#discardNextGeneration(backend);
  }

  async #discardNextGeneration(backend: LeasedReadmodelStoreBackend): Promise<void> {
    const name = this.#s.name;
    await this.#locks.fencedTransaction(backend, this.#s.token, async () => {
      await clearNextGeneration(backend, name);
      await backend.setCheckpoint(nextGenerationCheckpoint(name), 0);
    });
  }

  async #replayFromStore(signal: AbortSignal, before: number): Promise<number> {
    const s = this.#s;
    const host = s.requireHost();
    const filter = s.eventPathFilter();
    const head = filter === undefined ? 0 : await host.eventRepository.headPosition();
    let n = 0;
    let nextProgress = before + s.delivery.progressEvery;
    for await (const batch of s.readAfter(s.lastPosition, signal)) {
      if (signal.aborted) break;
      const fresh =
        batch[0] !== undefined && batch[0].position <= s.lastPosition ? batch.filter((e) => e.position > s.lastPosition) : batch;
      if (fresh.length === 0) continue;
      await this.#delivery.apply(fresh, true);
      n += fresh.length;
      if (s.rebuild !== undefined) {
        s.rebuild.replayed = before + n;
        s.rebuild.targetHead = Math.max(s.rebuild.targetHead, host.knownHead());
      }
      if (before + n >= nextProgress) {
        nextProgress += s.delivery.progressEvery;
        host.publish("RestoreProgress", {
          eventHandlerName: s.name,
          eventsReplayed: before + n,
          position: s.lastPosition,
          head: host.knownHead(),
        });
      }
    }
    // every event this handler reads up to `head` has been applied
    if (filter !== undefined && head > s.lastPosition && !signal.aborted) await this.#delivery.passedTo(head);
    return n;
  }
}

function contiguous(events: readonly Event[]): boolean {
  for (let i = 1; i < events.length; i++) if (events[i]!.position !== events[i - 1]!.position + 1) return false;
  return true;
}
