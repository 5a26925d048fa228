/**
 * The dashboard's stream reader (dashboard/src/sse.ts) against a scripted
 * text/event-stream server on 127.0.0.1: fields split across chunks (CRLF
 * too), comments, `retry:`, an `id:` alone, multi-line data, `event: gap`; on
 * the end of the stream it reconnects after `retry` with `Last-Event-ID`; a
 * 403 stops it for good.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StreamStatus, SystemEventStream } from "../../dashboard/src/sse.js";
import type { GapInfo, SystemEvent } from "../../dashboard/src/types.js";

const requests: IncomingHttpHeaders[] = [];
let script: ((res: ServerResponse) => Promise<void>)[] = [];
const server = createServer((req, res) => {
  requests.push(req.headers);
  const step = script.shift();
  if (step === undefined) {
    res.writeHead(503).end();
    return;
  }
  void step(res);
});
let url: string;

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/sse`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function writeChunks(res: ServerResponse, chunks: string[]): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store" });
  for (const c of chunks) {
    res.write(c);
    await sleep(5);
  }
  res.end();
}

describe("SystemEventStream (the dashboard's SSE reader)", () => {
  it("parses events across chunk boundaries, reports the gap, resumes with Last-Event-ID and stops on 403", async () => {
    requests.length = 0;
    script = [
      (res) =>
        writeChunks(res, [
          "retry: 50\n: connected\n\nid: 7\n\n",
          "id: 8\r",
          '\ndata: {"id":8,"kind":"CommandExecuted","at":1,"da',
          'ta":{}}\r\n\r\n',
          // A CR ending a chunk: if it were taken as a whole line end, the LF after it would end the event early.
          "event: gap\r",
          '\nid: 9\ndata: {"lastEventId":3,"reason":"unknown-epoch"}\n\n',
          'id: 10\ndata: {"id":10,\ndata: "kind":"RestoreStarted","at":2,"data":{}}\n\n',
          ": heartbeat\n\n",
          "data: not json\n\n",
        ]),
      async (res) => {
        res.writeHead(403, { "content-type": "application/problem+json" });
        res.end(JSON.stringify({ code: "PERMISSION_DENIED", detail: "administrators only" }));
      },
    ];
    const events: SystemEvent[] = [];
    const gaps: GapInfo[] = [];
    const statuses: { status: StreamStatus; detail?: string }[] = [];
    const stream = new SystemEventStream({
      url: () => new URL(url),
      headers: () => ({ authorization: "Bearer t" }),
      onEvent: (e) => events.push(e),
      onGap: (g) => gaps.push(g),
      onStatus: (status, detail) => statuses.push(detail === undefined ? { status } : { status, detail }),
      onUnauthenticated: () => {
        throw new Error("not a 401");
      },
    });
    stream.start();
    await expect.poll(() => statuses.at(-1)?.status, { timeout: 10_000 }).toBe("refused");

    expect(events.map((e) => [e.id, e.kind])).toEqual([
      [8, "CommandExecuted"],
      [10, "RestoreStarted"],
    ]);
    expect(gaps).toEqual([{ lastEventId: 3, reason: "unknown-epoch" }]);
    expect(requests).toHaveLength(2);
    expect(requests[0]!["last-event-id"]).toBeUndefined();
    expect(requests[0]!.authorization).toBe("Bearer t");
    // The last id of the stream, also from the event that carried no data it could read.
    expect(requests[1]!["last-event-id"]).toBe("10");
    expect(stream.reconnects).toBe(1);
    expect(statuses.map((s) => s.status)).toEqual(["connecting", "live", "reconnecting", "reconnecting", "refused"]);
    expect(statuses.at(-1)!.detail).toBe("administrators only");
    // Refused is final: no further request.
    await sleep(200);
    expect(requests).toHaveLength(2);
  });

  it("stop() ends the open stream and no reconnect follows", async () => {
    requests.length = 0;
    let closed = false;
    script = [
      async (res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write("retry: 20\nid: 1\n\n");
        res.on("close", () => (closed = true));
      },
    ];
    const statuses: StreamStatus[] = [];
    const stream = new SystemEventStream({
      url: () => new URL(url),
      headers: () => ({}),
      onEvent: () => undefined,
      onGap: () => undefined,
      onStatus: (s) => statuses.push(s),
      onUnauthenticated: () => undefined,
    });
    stream.start();
    await expect.poll(() => stream.lastEventId, { timeout: 10_000 }).toBe("1");
    stream.stop();
    await expect.poll(() => closed, { timeout: 10_000 }).toBe(true);
    await sleep(100);
    expect(requests).toHaveLength(1);
    expect(statuses.at(-1)).toBe("stopped");
  });
});
