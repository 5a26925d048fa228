/**
 * The clients of the pools mneme makes listen for 'error' for their whole
 * life: a session terminated while no other listener is attached (between
 * pg-pool's idle listener and a checkout's, or while a client ends) must not
 * be an 'error' event nobody hears, which ends the process.
 */
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { guardedClientClass } from "../../src/postgres/postgres-pool.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
afterAll(() => admin.end());

describe("guardedClientClass", () => {
  it("makes clients that listen for 'error' from their construction, one class per driver class", () => {
    const Guarded = guardedClientClass(pg.Client);
    expect(guardedClientClass(pg.Client)).toBe(Guarded);
    const client = new Guarded({ connectionString: DATABASE_URL });
    expect(client).toBeInstanceOf(pg.Client);
    expect(client.listenerCount("error")).toBe(1);
    // Nobody else listens: the event is heard and nothing is thrown.
    expect(() => client.emit("error", new Error("terminated"))).not.toThrow();
    const plain = new pg.Client({ connectionString: DATABASE_URL });
    expect(plain.listenerCount("error")).toBe(0);
    expect(() => plain.emit("error", new Error("terminated"))).toThrow("terminated");
  });

  it("a checked-out client whose session is terminated while it runs nothing is not queryable, and the process goes on", async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1, Client: guardedClientClass(pg.Client) });
    pool.on("error", () => undefined);
    try {
      const client = await pool.connect();
      // As a caller that adds no listener of its own would hold it: pg-pool removed its idle listener at checkout.
      expect(client.listenerCount("error")).toBe(1);
      const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
      await admin.query("SELECT pg_terminate_backend($1)", [pid]);
      // The FATAL message arrives with no query active: the client emits 'error', which its own listener hears.
      const deadline = Date.now() + 5000;
      while ((client as unknown as { _queryable: boolean })._queryable && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      expect((client as unknown as { _queryable: boolean })._queryable).toBe(false);
      await expect(client.query("SELECT 1")).rejects.toThrow();
      client.release(true);
      // The pool makes a new session for the next caller.
      expect((await pool.query<{ one: number }>("SELECT 1 AS one")).rows[0]!.one).toBe(1);
    } finally {
      await pool.end();
    }
  });
});
