/**
 * Places where several facades share one database, for tests that run on
 * memory, SQLite and Postgres: each `place()` call is a fresh database, and
 * the function it returns gives the options of one more facade on it (memory:
 * the first facade's stores by object; SQLite: one file; Postgres: one
 * schema). Also two senders of two tenants.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import { createFacade, type FacadeOptions, type RequestContext } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { postgresScratch } from "./postgres-scratch.js";

export const alice: RequestContext = {
  senderAccountUuid: "acc-a",
  senderSessionUuid: "s-a",
  senderIdentityUuid: "i-a",
  senderTenantUuid: "tenant-a",
};
export const bob: RequestContext = {
  senderAccountUuid: "acc-b",
  senderSessionUuid: "s-b",
  senderIdentityUuid: "i-b",
  senderTenantUuid: "tenant-b",
};

/** A fresh database; its function gives the stores of one more facade on it. */
export type Place = () => () => Partial<FacadeOptions>;

/** memory, sqlite and postgres places of one test file (`tag` names its files and schemas). */
export function sharedPlaces(tag: string): [name: string, place: Place][] {
  const dir = mkdtempSync(join(tmpdir(), `mneme-${tag}-`));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const pg = postgresScratch(`mneme_${tag}`);
  let seq = 0;
  return [
    [
      "memory",
      () => {
        const one = createFacade();
        const shared: Partial<FacadeOptions> = {
          eventRepository: one.eventRepository.stored,
          commandStore: one.commandStore,
          snapshotStore: one.snapshotStore,
          logStore: one.logStore,
          keyStore: one.keyStore,
        };
        return () => shared;
      },
    ],
    [
      "sqlite",
      () => {
        const filename = join(dir, `${tag}-${++seq}.db`);
        return () => createSqliteBackends({ filename });
      },
    ],
    [
      "postgres",
      () => {
        const schema = pg.newSchema();
        return () => createPostgresBackends({ pool: pg.pool, schema });
      },
    ],
  ];
}
