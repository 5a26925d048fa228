/**
 * The SSE clients of bench/live-queries.bench.ts, in a process of their own:
 * `node --import tsx bench/live-queries-clients.ts <url> <n>`. Opens `n` live
 * query streams, subscriber i with session `sessionOf(i)`, tells the parent
 * "ready" once each has its first result, and on "finish" with the count
 * expected, waits (at most 60 s) until every stream's last result is
 * `{"count":<expected>}`, then answers with the number of results received
 * and of streams that reached it.
 */
import { request as httpRequest, Agent, type IncomingMessage } from "node:http";

/** Subscriber i's session and identity (the parent's resolver reads them back). */
export function sessionOf(i: number): { token: string; identity: string } {
  const n = String(i).padStart(12, "0");
  return { token: `0190a7a2-7d3c-7b5e-9f01-${n}.bench-key`, identity: `0190a7a2-7d3c-7b5e-9f02-${n}` };
}

interface LiveClient {
  results: number;
  last: number;
}

function open(url: string, i: number, agent: Agent, ready: () => void): LiveClient {
  const c: LiveClient = { results: 0, last: -1 };
  const { token, identity } = sessionOf(i);
  const req = httpRequest(
    url,
    { headers: { authorization: `Bearer ${token}`, "x-identity-uuid": identity }, agent },
    (res: IncomingMessage) => {
      res.setEncoding("latin1");
      let buffer = "";
      res.on("data", (chunk: string) => {
        buffer += chunk;
        const end = buffer.lastIndexOf("\n\n");
        if (end < 0) return;
        const text = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let at = text.indexOf('data: {"count":');
        while (at >= 0) {
          c.results++;
          c.last = Number(text.slice(at + 15, text.indexOf("}", at)));
          if (c.results === 1) ready();
          at = text.indexOf('data: {"count":', at + 15);
        }
      });
    },
  );
  req.on("error", () => undefined);
  req.end();
  return c;
}

if (process.send !== undefined) {
  const [url, nText] = process.argv.slice(2);
  const n = Number(nText);
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  let ready = 0;
  const clients = Array.from({ length: n }, (_, i) => open(url!, i, agent, () => ready++));
  const readyTimer = setInterval(() => {
    if (ready < n) return;
    clearInterval(readyTimer);
    process.send!({ kind: "ready" });
  }, 20);
  process.on("message", (m: { kind: string; expected: number }) => {
    if (m.kind !== "finish") return;
    const deadline = performance.now() + 60_000;
    const check = setInterval(() => {
      if (clients.some((c) => c.last !== m.expected) && performance.now() < deadline) return;
      clearInterval(check);
      agent.destroy();
      process.send!(
        {
          kind: "done",
          results: clients.reduce((a, c) => a + c.results, 0),
          reached: clients.filter((c) => c.last === m.expected).length,
        },
        () => process.exit(0),
      );
    }, 20);
  });
}
