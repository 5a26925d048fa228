/**
 * The read of the store that the lanes of a partitioned handler share in a
 * process (PartitionReader): lanes that read together read each page once; a
 * lane that is behind reads on its own without holding the others back; a
 * lane whose position falls inside a page gets that page's rest; "nothing
 * more" read before a lane began does not end its reading; a failed shared
 * read is the next lane's to try again. Checked against a store that counts
 * its reads, with lanes stepped by hand (no timing).
 */
import { describe, expect, it } from "vitest";
import type { Event } from "mneme";
import { PartitionReader, sharedPageSize } from "../../src/readmodel/partition-reader.js";
import type { EventRepository, ReadAllOptions } from "../../src/store/event-repository.js";

/** A store of `events` that answers readAll as the backends do (pages until an empty one) and logs every page read. */
function store(count: number) {
  const events: Event[] = [];
  const add = (n: number) => {
    for (let i = 0; i < n; i++) {
      const position = events.length + 1;
      events.push({ position, aggregateUuid: `a-${position % 7}`, domain: "D", name: position % 3 === 0 ? "Other" : "Seen" } as Event);
    }
  };
  add(count);
  const reads: number[] = [];
  let failNext: Error | undefined;
  const repo = {
    async *readAll(opts: ReadAllOptions = {}): AsyncGenerator<Event[]> {
      let after = opts.afterPosition ?? 0;
      for (;;) {
        // A statement sees what committed before it began.
        const seen = events.slice(0, events.length);
        await Promise.resolve();
        reads.push(after);
        if (failNext !== undefined) {
          const e = failNext;
          failNext = undefined;
          throw e;
        }
        const page = seen
          .filter((e) => e.position > after && (opts.eventPaths === undefined || opts.eventPaths.includes(`${e.domain}.${e.name}`)))
          .slice(0, opts.batchSize ?? 1000);
        if (page.length === 0) return;
        after = page[page.length - 1]!.position;
        yield page;
      }
    },
  } as unknown as EventRepository;
  return {
    repo,
    reads,
    add,
    failOnce: (e: Error) => {
      failNext = e;
    },
  };
}

async function all(pages: AsyncIterable<Event[]>): Promise<number[]> {
  const out: number[] = [];
  for await (const p of pages) out.push(...p.map((e) => e.position));
  return out;
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe("PartitionReader", () => {
  it("lanes reading together from one position read each page of the store once", async () => {
    const s = store(1000);
    const reader = new PartitionReader(() => s.repo);
    const lanes = await Promise.all([0, 1, 2, 3].map(() => all(reader.pages({ afterPosition: 0, batchSize: 100 }))));
    for (const got of lanes) expect(got).toEqual(range(1, 1000));
    // Ten pages and the empty read at the head, each once (an unshared read would be 44).
    expect([...s.reads].sort((a, b) => a - b)).toEqual([...range(0, 10).map((i) => i * 100)]);
    // The page after each full one is read ahead, so after the first lane's first read every lane takes its pages from the reader.
    expect(reader.counts).toEqual({ read: 11, shared: 43 });
  });

  it("reads the page after a full one while the lane works on it, and none after a partial one", async () => {
    const s = store(250);
    const reader = new PartitionReader(() => s.repo);
    const it = reader.pages({ afterPosition: 0, batchSize: 100 })[Symbol.asyncIterator]();
    expect((await it.next()).value!.length).toBe(100);
    // The lane holds page 1 and has not asked for page 2: the read after 100 is under way already.
    await Promise.resolve();
    expect(s.reads).toEqual([0, 100]);
    expect((await it.next()).value!.length).toBe(100);
    await Promise.resolve();
    expect(s.reads).toEqual([0, 100, 200]);
    // The third page is partial (the head): nothing is read before the lane asks again.
    expect((await it.next()).value!.length).toBe(50);
    await Promise.resolve();
    expect(s.reads).toEqual([0, 100, 200]);
    expect((await it.next()).done).toBe(true);
    expect(s.reads).toEqual([0, 100, 200, 250]);
    expect(reader.counts).toEqual({ read: 4, shared: 2 });
  });

  it("keeps the filter of eventPaths: a lane gets only those events, and pages are shared between lanes alike", async () => {
    const s = store(300);
    const reader = new PartitionReader(() => s.repo);
    const read = { afterPosition: 0, batchSize: 50, eventPaths: ["D.Seen"] };
    const [a, b] = await Promise.all([all(reader.pages(read)), all(reader.pages(read))]);
    const seen = range(1, 300).filter((p) => p % 3 !== 0);
    expect(a).toEqual(seen);
    expect(b).toEqual(seen);
    expect(s.reads.length).toBe(5); // 200 events in pages of 50, and the empty read
  });

  it("a lane that is behind reads on its own while the others go on, and a lane inside a page gets the page's rest", async () => {
    const s = store(600);
    const reader = new PartitionReader(() => s.repo);
    const ahead = reader.pages({ afterPosition: 400, batchSize: 100 })[Symbol.asyncIterator]();
    const behind = reader.pages({ afterPosition: 0, batchSize: 100 })[Symbol.asyncIterator]();
    // The lane ahead reads to the head while the one behind has not read a page: nothing waits for it.
    const first = await ahead.next();
    expect((first.value as Event[])[0]!.position).toBe(401);
    // A lane at 450, inside the page the lane ahead read (400, 500]: that page's rest, without a read.
    const readsBefore = s.reads.length;
    const inside = reader.pages({ afterPosition: 450, batchSize: 100 })[Symbol.asyncIterator]();
    const rest = (await inside.next()).value as Event[];
    expect(rest.map((e) => e.position)).toEqual(range(451, 500));
    expect(s.reads.length).toBe(readsBefore);
    expect((await ahead.next()).value).toHaveLength(100);
    expect((await ahead.next()).done).toBe(true);
    // The lane behind catches up from its own position, every event once, in order.
    const got: number[] = [];
    for (let r = await behind.next(); r.done !== true; r = await behind.next()) got.push(...r.value.map((e) => e.position));
    expect(got).toEqual(range(1, 600));
    await inside.return(undefined);
  });

  it("an empty read from before a lane began does not end the lane's reading: events committed since are read", async () => {
    const s = store(100);
    const reader = new PartitionReader(() => s.repo);
    // A lane in the middle of its reading keeps the reader's pages alive.
    const holder = reader.pages({ afterPosition: 0, batchSize: 10 })[Symbol.asyncIterator]();
    expect((await holder.next()).value).toHaveLength(10);
    // Another lane reads at the head: the empty read at 100 is kept.
    expect(await all(reader.pages({ afterPosition: 100, batchSize: 10 }))).toEqual([]);
    const reads = s.reads.length;
    // 20 more commit; a lane that begins now at 100 must read them (the kept empty page is older than it).
    s.add(20);
    expect(await all(reader.pages({ afterPosition: 100, batchSize: 10 }))).toEqual(range(101, 120));
    expect(s.reads.slice(reads)).toEqual([100, 110, 120]);
    // The same with the empty read still under way when the lane begins: its answer is as old as its start.
    const atHead = reader.pages({ afterPosition: 120, batchSize: 10 })[Symbol.asyncIterator]();
    const under = atHead.next();
    s.add(5);
    const late = all(reader.pages({ afterPosition: 120, batchSize: 10 }));
    expect((await under).done).toBe(true);
    expect(await late).toEqual(range(121, 125));
    await holder.return(undefined);
  });

  it("a shared read that failed is read again by the next lane; the lane that started it gets the error", async () => {
    const s = store(50);
    const reader = new PartitionReader(() => s.repo);
    s.failOnce(new Error("connection lost"));
    const a = all(reader.pages({ afterPosition: 0, batchSize: 100 }));
    const b = all(reader.pages({ afterPosition: 0, batchSize: 100 }));
    await expect(a).rejects.toThrow("connection lost");
    expect(await b).toEqual(range(1, 50));
  });

  it("keeps nothing once no lane reads: a later read goes to the store", async () => {
    const s = store(100);
    const reader = new PartitionReader(() => s.repo);
    expect(await all(reader.pages({ afterPosition: 0, batchSize: 100 }))).toEqual(range(1, 100));
    const before = s.reads.length;
    expect(await all(reader.pages({ afterPosition: 0, batchSize: 100 }))).toEqual(range(1, 100));
    expect(s.reads.length).toBe(before + 2);
  });

  it("shares pages of restoreBatchSize events per partition, up to 10,000, never fewer than restoreBatchSize", () => {
    expect(sharedPageSize(1000, 4)).toBe(4000);
    expect(sharedPageSize(1000, 1)).toBe(1000);
    expect(sharedPageSize(1000, 256)).toBe(10_000);
    expect(sharedPageSize(20_000, 4)).toBe(20_000);
  });
});
