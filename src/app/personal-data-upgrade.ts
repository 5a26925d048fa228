/**
 * The facade's side of personal data written before it was declared
 * (docs/privacy.md, docs/upgrading.md): the start-up check, which says which
 * subjects `forget` cannot erase yet, and the migration that seals their
 * values. Kept out of facade.ts, which calls in with a few lines.
 */
import type { LogStore } from "../store/log-store.js";
import {
  type ClearPersonalData,
  migratePersonalData,
  type MigratePersonalDataOptions,
  type PersonalDataMigrationHost,
  type PersonalDataMigrationReport,
  recordCleanCheck,
  scanClearPersonalData,
} from "../privacy/personal-data-migration.js";
import { MnemeError } from "../model/errors.js";

/** The code of the process warning for personal data stored in clear (not erasable until the migration ran). */
export const PERSONAL_DATA_CLEAR_WARNING = "MNEME_PERSONAL_DATA_CLEAR";

/** Events of declared types the start-up check reads at most (option `personalData.startupCheckLimit`). */
export const DEFAULT_STARTUP_CHECK_LIMIT = 10_000;

/** The start-up check's limit from the facade option, checked (INVALID_REQUEST). */
export function startupCheckLimit(value: unknown): number {
  if (value === undefined) return DEFAULT_STARTUP_CHECK_LIMIT;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new MnemeError("INVALID_REQUEST", `personalData.startupCheckLimit must be an integer >= 0, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** The sentence of the warning, or undefined when nothing was found. */
export function clearPersonalDataMessage(found: ClearPersonalData): string | undefined {
  if (found.subjects === 0 && found.unnamed === 0) return undefined;
  const more = found.subjects > found.firstSubjects.length ? ", ..." : "";
  const checked = found.complete ? "" : ` (checked events up to position ${found.checkedThrough} of ${found.head}; there may be more)`;
  const unnamed = found.unnamed > 0 ? `; ${found.unnamed} event(s) whose subject cannot be named from the stored payload` : "";
  return (
    `personal data stored in clear: ${found.subjects}${found.subjectsCapped ? "+" : ""} subject(s) cannot be erased by forget ` +
    `until the migration has run (${found.events} event(s); ${found.firstSubjects.join(", ")}${more})${unnamed}${checked}; ` +
    "run facade.migratePersonalData(), the Runtime command MigratePersonalData or `mneme privacy migrate` (docs/upgrading.md)"
  );
}

/**
 * The start-up check: bounded by `limit` events read (0 skips it); warns
 * (process warning and LogStore) when it finds clear values, and records how
 * far a clean check of a large store got (see recordCleanCheck).
 */
export async function checkAtStart(
  host: PersonalDataMigrationHost,
  limit: number,
  logStore: LogStore,
): Promise<ClearPersonalData | undefined> {
  if (limit === 0) return undefined;
  const found = await scanClearPersonalData(host, limit);
  const message = clearPersonalDataMessage(found);
  if (message !== undefined) {
    if (typeof process !== "undefined" && typeof process.emitWarning === "function") {
      process.emitWarning(message, { code: PERSONAL_DATA_CLEAR_WARNING, detail: `subjects: ${found.firstSubjects.join(", ")}` });
    }
    await logStore.append({ level: "warn", source: "mneme.privacy", message, data: { ...found } }).catch(() => undefined);
  } else {
    await recordCleanCheck(host, found);
  }
  return found;
}

/** Runs the migration, then checks again from its mark (so the Runtime's answer is current). */
export async function runMigration(
  host: PersonalDataMigrationHost,
  opts: MigratePersonalDataOptions | undefined,
  limit: number,
): Promise<{ report: PersonalDataMigrationReport; after: ClearPersonalData }> {
  const report = await migratePersonalData(host, opts);
  const after = await scanClearPersonalData(host, Math.max(limit, 1));
  return { report, after };
}
