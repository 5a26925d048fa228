import { existsSync } from "node:fs";
import type pg from "pg";
import { MnemeError } from "../model/errors.js";
import { PG, requireDriver } from "../store/driver.js";
import {
  archiveEvents,
  type ArchiveEventsOptions,
  type ArchiveEventsReport,
  restoreEvents,
  type RestoreEventsOptions,
  type RestoreEventsReport,
} from "../event-archive/archive-events.js";
import type { EventArchiveStore } from "../event-archive/archive-index.js";
import { PostgresEventArchive } from "../postgres/postgres-event-archive.js";
import { SqliteEventArchive } from "../sqlite/sqlite-event-archive.js";
import type { StoreLocation } from "./copy-store.js";
import { parsePostgresUrl } from "./postgres-copy-endpoint.js";

/** The archive side of a store named as `store copy` names one, and how to let it go. */
function openArchiveStore(location: StoreLocation): { store: EventArchiveStore; close: () => Promise<void> } {
  if (typeof location === "string" && /^postgres(ql)?:\/\//i.test(location)) location = { postgres: parsePostgresUrl(location) };
  if (typeof location === "object" && location !== null && "postgres" in location) {
    const { Pool } = requireDriver<typeof pg>(PG);
    const pool = new Pool({ connectionString: location.postgres.connectionString, max: 2 });
    pool.on("error", () => undefined);
    const u = new URL(location.postgres.connectionString);
    const store = new PostgresEventArchive({
      pool,
      schema: location.postgres.schema ?? "public",
      connectionInfo: `${u.host}${u.pathname} schema ${location.postgres.schema ?? "public"}`,
    });
    return {
      store,
      close: async () => {
        await store.close();
        await pool.end();
      },
    };
  }
  const sqlite =
    typeof location === "string" ? { filename: location.replace(/^sqlite:/i, "") } : "sqlite" in location ? location.sqlite : undefined;
  if (sqlite === undefined || sqlite.filename === "")
    throw new MnemeError("INVALID_REQUEST", "store archive: --store must be a SQLite file or a postgres:// URL");
  if (!existsSync(sqlite.filename)) throw new MnemeError("NOT_FOUND", `store archive: the file ${sqlite.filename} does not exist`);
  const store = new SqliteEventArchive({
    filename: sqlite.filename,
    ...(sqlite.tablePrefix === undefined ? {} : { tablePrefix: sqlite.tablePrefix }),
    ...(sqlite.driver === undefined ? {} : { driver: sqlite.driver }),
  });
  return { store, close: () => store.close() };
}

/**
 * Archives the events of a store below a boundary into verified files
 * without starting an app (the library behind `mneme store archive`; see
 * `archiveEvents` for the steps and the guarantees).
 * @example
 * await archiveStore("app.db", { before: new Date("2026-01-01"), to: "/backup/app-archive" });
 */
export async function archiveStore(location: StoreLocation, opts: ArchiveEventsOptions): Promise<ArchiveEventsReport> {
  const { store, close } = openArchiveStore(location);
  try {
    return await archiveEvents(store, opts);
  } finally {
    await close();
  }
}

/** Brings every archived event of a store back into its database (`mneme store archive --restore`; see `restoreEvents`). */
export async function restoreStoreArchive(location: StoreLocation, opts: RestoreEventsOptions = {}): Promise<RestoreEventsReport> {
  const { store, close } = openArchiveStore(location);
  try {
    return await restoreEvents(store, opts);
  } finally {
    await close();
  }
}
