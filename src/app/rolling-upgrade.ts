/**
 * The facade's side of a rolling deploy in compatibility mode (docs/upgrading.md,
 * Rolling deploys): while the event store admits the writers of an earlier
 * release (`rollingFrom`, its format record's lowest writer below this
 * release's), this release writes only what that release reads correctly
 * (personal data in clear: 0.1.0 cannot open sealed fields), and
 * `finishRollingUpgrade` ends the mode: every store refuses the old writers
 * again, then the personal-data migration seals what was written in clear.
 */
import { MnemeError } from "../model/errors.js";
import type { MigratePersonalDataOptions, PersonalDataMigrationReport } from "../privacy/personal-data-migration.js";
import type { RollingUpgradeReport } from "../runtime/runtime.js";
import { admitsOldWriters, isStoreFormatted, rollingFromOf, type RollingFrom, type StoreFormatRecord } from "../store/store-format.js";

/** A store that can re-read its format record and end compatibility mode (the Postgres stores). */
interface RollingStore {
  storeFormat(): StoreFormatRecord | undefined;
  currentStoreFormat(): Promise<StoreFormatRecord | undefined>;
  finishRollingUpgrade(): Promise<StoreFormatRecord | undefined>;
}

/** A readmodel backend that can count the documents old writers left without a tenant. */
interface UnscopedDocumentsCounter {
  unscopedDocuments(): Promise<{ collection: string; documents: number }[]>;
}

function isRollingStore(store: unknown): store is RollingStore {
  return (
    isStoreFormatted(store) &&
    typeof (store as Partial<RollingStore>).currentStoreFormat === "function" &&
    typeof (store as Partial<RollingStore>).finishRollingUpgrade === "function"
  );
}

function countsUnscopedDocuments(store: unknown): store is UnscopedDocumentsCounter {
  return (
    typeof store === "object" && store !== null && typeof (store as Partial<UnscopedDocumentsCounter>).unscopedDocuments === "function"
  );
}

/** Options of `facade.finishRollingUpgrade`. */
export interface FinishRollingUpgradeOptions extends MigratePersonalDataOptions {
  /**
   * How long to wait after the stores refuse the old writers before the
   * migration reads the events (default 1000 ms): an append of another
   * instance that confirmed compatibility mode just before lands meanwhile.
   */
  readonly settleMs?: number;
}

/** What the facade gives the rolling upgrade. */
export interface RollingUpgradeHost {
  /** The event repository as the backend made it (not the facade's view of it). */
  readonly eventStore: unknown;
  /** Every store once. */
  stores(): readonly unknown[];
  migrate(opts: MigratePersonalDataOptions): Promise<PersonalDataMigrationReport>;
}

export class RollingUpgrade {
  constructor(private readonly host: RollingUpgradeHost) {}

  /** The release whose writers the event store admits, as this instance last read the record (undefined: none). */
  get from(): RollingFrom | undefined {
    const store = this.host.eventStore;
    return isStoreFormatted(store) ? rollingFromOf(store.storeFormat()) : undefined;
  }

  /**
   * True when events may be written the way the old release reads them (personal data in clear): the record
   * as last read admits old writers, and still does when read again now (another instance may have finished).
   */
  async writesForOldReaders(): Promise<boolean> {
    const store = this.host.eventStore;
    if (this.from === undefined || !isRollingStore(store)) return false;
    return admitsOldWriters(await store.currentStoreFormat());
  }

  /** Ends compatibility mode on every store, waits `settleMs`, then seals the personal data written in clear. */
  async finish(opts: FinishRollingUpgradeOptions = {}): Promise<RollingUpgradeReport> {
    const settleMs = opts.settleMs ?? 1000;
    if (!Number.isInteger(settleMs) || settleMs < 0 || settleMs > 600_000) {
      throw new MnemeError("INVALID_REQUEST", `finishRollingUpgrade: settleMs must be an integer in 0..600000, got ${String(settleMs)}`);
    }
    const store = this.host.eventStore;
    // The event store first: the facade lists its view of it, which does not end the mode itself.
    const rolling = [...new Set([store, ...this.host.stores()])].filter(isRollingStore);
    // As stored now: another instance may have finished already.
    const wasFrom = isRollingStore(store) ? rollingFromOf(await store.currentStoreFormat()) : undefined;
    for (const s of rolling) await s.finishRollingUpgrade();
    if (settleMs > 0) await new Promise((resolve) => setTimeout(resolve, settleMs));
    const { settleMs: _settle, ...migrateOpts } = opts;
    const migration = await this.host.migrate(migrateOpts);
    const unscopedDocuments: RollingUpgradeReport["unscopedDocuments"] = [];
    for (const s of this.host.stores()) if (countsUnscopedDocuments(s)) unscopedDocuments.push(...(await s.unscopedDocuments()));
    return {
      finishedFrom: wasFrom ?? null,
      storeFormat: isStoreFormatted(store) ? (store.storeFormat() ?? null) : null,
      unscopedDocuments,
      migration,
    };
  }
}
