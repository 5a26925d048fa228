/**
 * The lanes of a partitioned handler read only the partitions held in their
 * process: readAll's `keepAggregate` hint makes Postgres and SQLite leave the
 * other aggregates' events out before decoding them, keeping each page's last
 * event so that a reader's position still advances to where the page ended;
 * the PartitionReader asks for the partitions held here and never hands a
 * lane a page read without its partition.
 */
import { describe, expect, it } from "vitest";
import { type Event, newUuid, type NewEvent } from "mneme";
import { PostgresEventRepository } from "mneme/postgres";
import { SqliteEventRepository } from "mneme/sqlite";
import { PartitionReader } from "../src/readmodel/partition-reader.js";
import { partitionOf } from "../src/readmodel/partition-routing.js";
import type { EventRepository } from "../src/store/event-repository.js";
import { postgresScratch } from "./support/postgres-scratch.js";

const scratch = postgresScratch("mneme_pread");

const backends: [string, () => Promise<EventRepository>][] = [
  [
    "postgres",
    async () => {
      const repo = new PostgresEventRepository({ pool: scratch.newPool(2), schema: scratch.newSchema(), pollIntervalMs: 0 });
      await repo.init();
      return repo;
    },
  ],
  [
    "sqlite",
    async () => {
      const repo = new SqliteEventRepository({ filename: ":memory:" });
      await repo.init();
      return repo;
    },
  ],
];

const COUNT = 4;

/** 240 events over 24 aggregates (every partition has some), with payloads and request contexts to decode. */
async function seeded(repo: EventRepository): Promise<Event[]> {
  const aggregates = Array.from({ length: 24 }, () => newUuid());
  const all: NewEvent[] = Array.from({ length: 240 }, (_, i) => ({
    domain: "Test",
    name: i % 5 === 0 ? "Other" : "Happened",
    aggregateUuid: aggregates[i % aggregates.length]!,
    payload: { n: i, nested: { list: [i, "x"] } },
    reqCtx: { traceId: `t${i}`, attributes: { i } },
  }));
  const stored: Event[] = [];
  for (let i = 0; i < all.length; i += 40) stored.push(...(await repo.append(all.slice(i, i + 40))));
  return stored;
}

async function pagesOf(it: AsyncIterable<Event[]>): Promise<Event[][]> {
  const out: Event[][] = [];
  for await (const page of it) out.push(page);
  return out;
}

describe.each(backends)("a partition-filtered read (%s)", (_, open) => {
  it("yields exactly the held partitions' events and each page's last event, decoded as an unfiltered read decodes them", async () => {
    const repo = await open();
    try {
      const stored = await seeded(repo);
      const held = new Set([1, 3]);
      const keepAggregate = (a: string) => held.has(partitionOf(a, COUNT));
      const opts = { batchSize: 30, eventPaths: ["Test.Happened"] };
      const plain = await pagesOf(repo.readAll(opts));
      const kept = await pagesOf(repo.readAll({ ...opts, keepAggregate }));
      expect(plain.flat()).toEqual(stored.filter((e) => e.name === "Happened"));
      expect(kept).toHaveLength(plain.length);
      kept.forEach((page, i) => {
        const whole = plain[i]!;
        const last = whole[whole.length - 1]!;
        const expected = whole.filter((e) => e === last || keepAggregate(e.aggregateUuid));
        expect(page).toEqual(expected);
      });
      // Some pages end on an event of a partition not held: the reader still learns where the page ended.
      expect(kept.some((p) => !keepAggregate(p[p.length - 1]!.aggregateUuid))).toBe(true);
      expect(kept.flat().length).toBeLessThan(plain.flat().length);
    } finally {
      await repo.close();
    }
  });

  it("through the reader the lanes share: a lane gets every event of its partition, positions advancing to the head", async () => {
    const repo = await open();
    try {
      const stored = await seeded(repo);
      const head = stored[stored.length - 1]!.position;
      let held = [1];
      const reader = new PartitionReader(() => repo, { count: COUNT, held: () => held });
      const lane = async (partition: number | undefined) => {
        const got: Event[] = [];
        let at = 0;
        for await (const page of reader.pages({ afterPosition: 0, batchSize: 25, ...(partition === undefined ? {} : { partition }) })) {
          for (const e of page) {
            expect(e.position).toBeGreaterThan(at);
            at = e.position;
          }
          got.push(...page);
        }
        return { got, at };
      };
      const own = (p: number) => stored.filter((e) => partitionOf(e.aggregateUuid, COUNT) === p);

      const one = await lane(1);
      expect(one.at).toBe(head);
      expect(one.got.filter((e) => partitionOf(e.aggregateUuid, COUNT) === 1)).toEqual(own(1));
      expect(one.got.length).toBeLessThan(stored.length);

      // Lanes 1 and 2 read together while only 1 is held: lane 2 never gets a page read for partition 1 alone.
      const [a, b] = await Promise.all([lane(1), lane(2)]);
      expect(a.got.filter((e) => partitionOf(e.aggregateUuid, COUNT) === 1)).toEqual(own(1));
      expect(b.got.filter((e) => partitionOf(e.aggregateUuid, COUNT) === 2)).toEqual(own(2));
      expect(b.at).toBe(head);

      // Every partition held, or a read for every partition (a restore from zero): every event.
      held = [0, 1, 2, 3];
      expect((await lane(0)).got).toEqual(stored);
      held = [0];
      expect((await lane(undefined)).got).toEqual(stored);
    } finally {
      await repo.close();
    }
  });
});
