/**
 * Claims of idempotent dispatch: before a command with a caller's commandUuid
 * runs, its instance claims the commandUuid in the command store, with a
 * lease it renews while the handler runs; duplicates on other instances wait
 * (bounded) for the record that resolves the claim and replay it. A claim of
 * an instance that died is taken over at once where the store can tell (the
 * holder's process on SQLite, its session on Postgres; in memory claims die
 * with the process), else when its lease expires.
 */
import { COMMAND_IN_PROGRESS, errorMessage, MnemeError } from "../model/errors.js";
import { commandStoreCapabilities } from "../store/backend.js";
import type { CommandClaimant, CommandRecord, CommandStore } from "../store/command-store.js";

/** Options of claims (`createFacade({ idempotency })`). */
export interface IdempotencyOptions {
  /**
   * How long a claim holds without renewal (ms, default 30,000): the running
   * instance renews it every third of that, so it expires only when the
   * instance is gone (crashed, cut off), and then a duplicate takes it over.
   */
  readonly leaseMs?: number;
  /**
   * How long a duplicate waits for a command in progress on another instance
   * (ms, default 10,000) before it gives up with CONFLICT (in progress).
   */
  readonly waitMs?: number;
}

/** The defaults of {@link IdempotencyOptions}. */
export const DEFAULT_IDEMPOTENCY: Required<IdempotencyOptions> = { leaseMs: 30_000, waitMs: 10_000 };

/** Merges and validates the options once, at construction (INVALID_REQUEST). */
export function idempotencyOptions(given: IdempotencyOptions | undefined): Required<IdempotencyOptions> {
  const o = { ...DEFAULT_IDEMPOTENCY, ...given };
  if (!Number.isSafeInteger(o.leaseMs) || o.leaseMs < 10) {
    throw new MnemeError("INVALID_REQUEST", `idempotency.leaseMs must be an integer >= 10, got ${String(o.leaseMs)}`);
  }
  if (!Number.isSafeInteger(o.waitMs) || o.waitMs < 0) {
    throw new MnemeError("INVALID_REQUEST", `idempotency.waitMs must be an integer >= 0, got ${String(o.waitMs)}`);
  }
  return o;
}

/** A command store that offers claims. */
export type ClaimingCommandStore = CommandStore & Required<Pick<CommandStore, "claim" | "renewClaim" | "releaseClaim">>;

/** The store when it offers all three claim methods, else undefined (a store offering some is refused with INVALID_REQUEST). */
export function claimingStore(store: CommandStore): ClaimingCommandStore | undefined {
  return commandStoreCapabilities(store).claims ? (store as ClaimingCommandStore) : undefined;
}

/** Longest pause between two looks of a waiting duplicate (ms). */
const MAX_POLL_MS = 50;

/**
 * Claims `commandUuid` for `claimant`: a held claim (the caller runs the
 * command), or the succeeded record to replay. A duplicate of a command in
 * progress elsewhere waits up to `waitMs`, looking again with growing pauses,
 * then gets CONFLICT saying the command is in progress.
 */
export async function claimCommand(
  store: ClaimingCommandStore,
  commandUuid: string,
  claimant: CommandClaimant,
  waitMs: number,
  onRenewFailure: (message: string) => void,
): Promise<{ readonly claim: HeldClaim } | { readonly record: CommandRecord }> {
  const deadline = performance.now() + waitMs;
  let pause = 2;
  for (;;) {
    const found = await store.claim(commandUuid, claimant);
    if (found.outcome === "claimed") return { claim: new HeldClaim(store, commandUuid, claimant, onRenewFailure) };
    if (found.outcome === "recorded") return { record: found.record };
    const left = deadline - performance.now();
    if (left <= 0) {
      throw new MnemeError(
        "CONFLICT",
        `command ${commandUuid} is in progress on instance ${found.owner} (claimed until ${new Date(found.expiresAt).toISOString()}): ` +
          "its outcome is not known yet; send it again later to get it",
        { details: [{ message: COMMAND_IN_PROGRESS, commandUuid, owner: found.owner, expiresAt: found.expiresAt }] },
      );
    }
    await new Promise((r) => setTimeout(r, Math.min(pause, left)));
    pause = Math.min(pause * 2, MAX_POLL_MS);
  }
}

/**
 * A claim this instance holds while its command runs: renewed every third of
 * the lease until `end()`. The command's record resolves it in the record's
 * own write (`resolved()`); a claim left unresolved (the record could not be
 * written) is released at `end()`, so that a retry need not wait for the lease.
 */
export class HeldClaim {
  readonly #store: ClaimingCommandStore;
  readonly #commandUuid: string;
  readonly #owner: string;
  #timer: ReturnType<typeof setInterval> | undefined;
  #resolved = false;

  constructor(store: ClaimingCommandStore, commandUuid: string, claimant: CommandClaimant, onRenewFailure: (message: string) => void) {
    this.#store = store;
    this.#commandUuid = commandUuid;
    this.#owner = claimant.owner;
    const leaseMs = claimant.leaseMs;
    this.#timer = setInterval(
      () => {
        store.renewClaim(commandUuid, claimant.owner, leaseMs).then(
          (held) => {
            // Lost (expired and taken over): the record's primary key still keeps one outcome.
            if (!held && this.#timer !== undefined)
              onRenewFailure(`the claim of command ${commandUuid} was taken over by another instance`);
          },
          (e: unknown) => onRenewFailure(`renewing the claim of command ${commandUuid} failed: ${errorMessage(e)}`),
        );
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
    // A pending renewal must not keep a process alive (unref is Node's; elsewhere timers do not hold the process).
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** The command's record was written: its write replaced the claim. */
  resolved(): void {
    this.#resolved = true;
  }

  /** Stops renewing; releases the claim unless the record resolved it (best effort: the lease bounds a failed release). */
  async end(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    if (this.#resolved) return;
    await this.#store.releaseClaim(this.#commandUuid, this.#owner).catch(() => undefined);
  }
}
