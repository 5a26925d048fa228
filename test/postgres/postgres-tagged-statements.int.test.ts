/**
 * The prepared statements of tag queries (DCB reads) are named by their text:
 * repositories sharing one pool and one schema (a facade's and store copy's,
 * or two facades in one process) prepare the same names on the same
 * connections, so a name must never stand for two texts.
 */
import { describe, expect, it } from "vitest";
import { PostgresEventRepository } from "mneme/postgres";
import { postgresScratch } from "../support/postgres-scratch.js";

const pg = postgresScratch("tagstmt");

describe("tag query statements on a shared pool", () => {
  it("two repositories on one connection read queries of different shapes in different orders", async () => {
    const schema = pg.newSchema();
    const pool = pg.newPool(1); // one connection: both repositories prepare on it
    const a = new PostgresEventRepository({ pool, schema });
    const b = new PostgresEventRepository({ pool, schema });
    try {
      await a.init();
      await b.init();
      const oneTag = [{ tags: ["course:c"] }];
      const twoItems = [{ tags: ["course:c"] }, { tags: ["student:s", "course:c"] }];
      // a prepares oneTag first, b twoItems first: names given by order would collide on the connection.
      expect(await a.readTagged!("t", oneTag)).toEqual({ events: [], position: 0 });
      expect(await b.readTagged!("t", twoItems)).toEqual({ events: [], position: 0 });
      expect(await a.readTagged!("t", twoItems)).toEqual({ events: [], position: 0 });
      expect(await b.readTagged!("t", oneTag)).toEqual({ events: [], position: 0 });
      // Concurrent reads go through the grouped statement (one per shape): named by its text too.
      const many = await Promise.all([
        ...Array.from({ length: 6 }, () => a.readTagged!("t", oneTag)),
        ...Array.from({ length: 6 }, () => b.readTagged!("t", twoItems)),
        ...Array.from({ length: 6 }, () => b.readTagged!("t", oneTag)),
        ...Array.from({ length: 6 }, () => a.readTagged!("t", twoItems)),
      ]);
      for (const r of many) expect(r).toEqual({ events: [], position: 0 });
    } finally {
      await a.close();
      await b.close();
    }
  });
});
