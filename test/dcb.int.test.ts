/**
 * Dynamic consistency boundaries on every backend: the DCB conformance suite
 * (the dcb.events examples) on memory, a SQLite file and a Postgres schema.
 */
import { describeDcbContract, dcbWorld } from "mneme/testing";
import { createMemoryBackends } from "mneme/memory";
import { createSqliteBackends } from "mneme/sqlite";
import { createPostgresBackends } from "mneme/postgres";
import { sqliteScratch } from "./support/sqlite-scratch.js";
import { postgresScratch } from "./support/postgres-scratch.js";

const files = sqliteScratch("dcb");
const pg = postgresScratch("dcb");

describeDcbContract("memory", async () => dcbWorld({ backend: createMemoryBackends() }));
describeDcbContract("sqlite", async () => dcbWorld({ backend: createSqliteBackends({ filename: files.newFile() }) }));
describeDcbContract("postgres", async () => dcbWorld({ backend: createPostgresBackends({ pool: pg.pool, schema: pg.newSchema() }) }));
