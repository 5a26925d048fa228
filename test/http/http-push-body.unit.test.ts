/**
 * The write path of event streams: SseWriter as a pushed body, written
 * straight into a node:http response by toNodeListener (a PushTarget) or read
 * as a ReadableStream elsewhere; the shared StreamTicker behind heartbeats and
 * re-checks; the EventTail's spaced fan-out. Back-pressure is the point: a
 * client that stops taking bytes has what comes held (not written), and past
 * `maxQueued` events its stream ends and the held bytes are dropped.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { MemoryEventRepository } from "mneme/memory";
import type { Event } from "../../src/model/types.js";
import { EventTail, type TailSubscriber } from "../../src/http/event-tail.js";
import { isPushBody, type PushTarget, type Reply } from "../../src/http/exchange.js";
import { SseWriter, StreamTicker } from "../../src/http/stream-access.js";
import { toNodeListener } from "../../src/http/node-listener.js";
import { withDirectHandler } from "../../src/http/exchange.js";

const decoder = new TextDecoder();
const text = (chunks: readonly Uint8Array[]) => chunks.map((c) => decoder.decode(c)).join("");

/** A PushTarget that takes bytes while `room` is true, recording every write call. */
class FakeTarget implements PushTarget {
  readonly writes: Uint8Array[][] = [];
  room = true;
  ended = 0;
  write(chunks: readonly Uint8Array[]): boolean {
    this.writes.push([...chunks]);
    return this.room;
  }
  end(): void {
    this.ended++;
  }
  get all(): string {
    return this.writes.map(text).join("");
  }
}

describe("SseWriter written straight into a target (the node:http path)", () => {
  it("writes the first text on attach and each push at once while the target takes them", () => {
    const closed = vi.fn();
    const w = new SseWriter("retry: 1\n\n", 10, closed);
    expect(isPushBody(w)).toBe(true);
    const t = new FakeTarget();
    w.attach(t);
    expect(w.push("id: 1\n\n")).toBe(true);
    expect(w.push(new TextEncoder().encode("id: 2\n\n"))).toBe(true);
    expect(t.writes.map(text)).toEqual(["retry: 1\n\n", "id: 1\n\n", "id: 2\n\n"]);
    expect(closed).not.toHaveBeenCalled();
  });

  it("holds pushes while the target is full and writes them in one call, in order, when it drains", async () => {
    const w = new SseWriter("", 10, () => undefined);
    const t = new FakeTarget();
    const events = w.attach(t);
    t.room = false;
    w.push("a\n\n"); // written; the target now reports itself full
    w.push("b\n\n");
    w.push("c\n\n", 3);
    expect(t.writes.map(text)).toEqual(["", "a\n\n"]);
    let roomy = false;
    const room = w.room().then(() => (roomy = true));
    await Promise.resolve();
    expect(roomy).toBe(false);
    t.room = true;
    events.drained();
    await room;
    expect(t.writes.at(-1)!.map((c) => decoder.decode(c))).toEqual(["b\n\n", "c\n\n"]);
    w.push("d\n\n");
    expect(t.writes.at(-1)!.map((c) => decoder.decode(c))).toEqual(["d\n\n"]);
  });

  it("ends the stream past maxQueued held events, drops what it held and tells its owner once", () => {
    const closed = vi.fn();
    const w = new SseWriter("", 5, closed);
    const t = new FakeTarget();
    w.attach(t);
    t.room = false;
    w.push("first\n\n");
    for (let i = 0; i < 5; i++) expect(w.push(`held ${i}\n\n`)).toBe(true);
    expect(w.push("one too many\n\n")).toBe(false);
    expect(w.closed).toBe(true);
    expect(t.all).toBe("first\n\n");
    expect(t.ended).toBe(1);
    expect(closed).toHaveBeenCalledTimes(1);
    expect(w.push("after\n\n")).toBe(false);
    w.close();
    expect(closed).toHaveBeenCalledTimes(1);
  });

  it("counts the events a push carries against maxQueued", () => {
    const w = new SseWriter("", 10, () => undefined);
    const t = new FakeTarget();
    w.attach(t);
    t.room = false;
    w.push("x");
    expect(w.push("page of 8", 8)).toBe(true);
    expect(w.push("page of 3", 3)).toBe(false);
  });

  it("a normal close writes what it held before ending; a client gone gets nothing more", () => {
    const w = new SseWriter("", 10, () => undefined);
    const t = new FakeTarget();
    w.attach(t);
    t.room = false;
    w.push("a\n\n");
    w.push("event: error\n\n");
    w.close();
    expect(t.all).toBe("a\n\nevent: error\n\n");
    expect(t.ended).toBe(1);

    const closed = vi.fn();
    const w2 = new SseWriter("", 10, closed);
    const t2 = new FakeTarget();
    const events = w2.attach(t2);
    t2.room = false;
    w2.push("a\n\n");
    w2.push("b\n\n");
    events.gone();
    expect(w2.closed).toBe(true);
    expect(closed).toHaveBeenCalledTimes(1);
    expect(t2.all).toBe("a\n\n");
    expect(t2.ended).toBe(0);
  });

  it("closed before it is attached: the first text goes out and the target is ended at once", () => {
    const w = new SseWriter("retry: 1\n\n", 10, () => undefined);
    w.push("id: 0\n\n");
    w.close();
    const t = new FakeTarget();
    w.attach(t);
    expect(t.all).toBe("retry: 1\n\nid: 0\n\n");
    expect(t.ended).toBe(1);
  });
});

describe("SseWriter read as a ReadableStream (the Fetch API path)", () => {
  it("gives one chunk per read, merges what came meanwhile, and cuts off a reader that stops", async () => {
    const closed = vi.fn();
    const w = new SseWriter("retry: 1\n\n", 3, closed);
    const reader = w.stream().getReader();
    expect(decoder.decode((await reader.read()).value)).toBe("retry: 1\n\n");
    w.push("a\n\n");
    w.push("b\n\n");
    expect(decoder.decode((await reader.read()).value)).toBe("a\n\nb\n\n");
    // The reader stops (no read pending, highWaterMark 0): three events may be held, the fourth ends the stream.
    for (const x of ["c", "d", "e"]) expect(w.push(`${x}\n\n`)).toBe(true);
    expect(closed).not.toHaveBeenCalled();
    expect(w.push("f\n\n")).toBe(false);
    expect(closed).toHaveBeenCalledTimes(1);
    expect((await reader.read()).done).toBe(true);
  });
});

describe("SseWriter through toNodeListener on a real socket", () => {
  const servers: { close(): void }[] = [];
  afterEach(() => {
    for (const s of servers.splice(0)) s.close();
  });

  it("a client that stops reading fills the socket, the writer holds, and past maxQueued the response ends", async () => {
    let writer: SseWriter | undefined;
    const closed = vi.fn();
    const direct = {
      answer: (): Promise<Reply> => {
        writer = new SseWriter(": connected\n\n", 20, closed);
        return Promise.resolve({ status: 200, headers: { "content-type": "text/event-stream" }, body: writer });
      },
    };
    const handler = withDirectHandler(() => Promise.reject(new Error("not the Fetch path")), direct);
    const server = createServer((req, res) => void toNodeListener(handler)(req, res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    servers.push({ close: () => server.close() });
    const { port } = server.address() as AddressInfo;
    // A raw client that sends the request and then reads nothing.
    const socket = connect(port, "127.0.0.1");
    socket.setNoDelay(true);
    socket.write(`GET /stream HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`);
    socket.pause();
    await vi.waitFor(() => expect(writer).toBeDefined());
    const big = `data: ${"x".repeat(256 * 1024)}\n\n`;
    let pushes = 0;
    // The socket's buffers fill after some pushes; from then on they are held, and the 21st held one ends the stream.
    while (writer!.push(big)) {
      pushes++;
      await new Promise((r) => setImmediate(r));
      expect(pushes).toBeLessThan(10_000);
    }
    expect(writer!.closed).toBe(true);
    expect(closed).toHaveBeenCalledTimes(1);
    expect(pushes).toBeGreaterThanOrEqual(20);
    // Reading now gives the bytes written before the cut-off and then the end of the response.
    let received = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (received += chunk));
    socket.resume();
    await vi.waitFor(() => expect(received.endsWith("0\r\n\r\n")).toBe(true), { timeout: 20_000 });
    const written = received.split("data: ").length - 1;
    expect(written).toBeGreaterThan(0);
    expect(written).toBeLessThan(pushes);
    socket.destroy();
  });
});

describe("StreamTicker", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("calls every member once per period, dealt over the period's ticks, and stops when none is left", () => {
    vi.useFakeTimers();
    const ticker = new StreamTicker(1000, 10);
    const calls: number[] = [];
    const removes = Array.from({ length: 20 }, (_, i) => ticker.add(() => calls.push(i)));
    vi.advanceTimersByTime(100);
    expect(calls).toEqual([0, 10]); // the first tick runs the first slot only
    vi.advanceTimersByTime(900);
    expect(calls.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    calls.length = 0;
    vi.advanceTimersByTime(1000);
    expect(calls.length).toBe(20);
    for (const r of removes) r();
    removes[0]!(); // idempotent
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("EventTail fan-out", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("hands out a page at most every subscribers / fanOutWritesPerSecond, what came meanwhile with it, every event once and in order", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance"] });
    const repo = new MemoryEventRepository();
    // 20 subscribers at 200 writes/s: a page at most every 100 ms.
    const tail = new EventTail(repo, 60_000, 200);
    await tail.ensureStarted();
    const seen: number[][] = [];
    const pages: number[] = [];
    for (let i = 0; i < 20; i++) {
      const mine: number[] = [];
      seen.push(mine);
      const s: TailSubscriber = {
        deliver: (events: readonly Event[]) => {
          if (i === 0) pages.push(events.length);
          for (const e of events) mine.push(e.position);
        },
        fail: () => undefined,
      };
      expect(tail.join(s, tail.position)).toBe(true);
    }
    const append = (k: number) => repo.append([{ domain: "T", name: "E", aggregateUuid: `a${k}`, payload: {} }]);
    await append(0);
    await vi.advanceTimersByTimeAsync(0);
    expect(pages).toEqual([1]); // the first goes out at once
    for (let k = 1; k <= 9; k++) {
      await append(k);
      await vi.advanceTimersByTimeAsync(5);
    }
    expect(pages).toEqual([1]); // 45 ms after the first page: held
    await vi.advanceTimersByTimeAsync(60);
    expect(pages).toEqual([1, 9]); // 100 ms after it (t = 100): the nine together
    await append(10); // t = 105
    await vi.advanceTimersByTimeAsync(90);
    expect(pages).toEqual([1, 9]);
    await vi.advanceTimersByTimeAsync(10); // t = 205, past 100 ms after the last page
    expect(pages).toEqual([1, 9, 1]);
    const positions = Array.from({ length: 11 }, (_, i) => i + 1);
    for (const mine of seen) expect(mine).toEqual(positions);
  });
});
