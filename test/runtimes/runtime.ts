/**
 * What the runtime suites need to know about the runtime they run on, and a
 * way to serve a Fetch handler with that runtime's own server (Bun.serve,
 * Deno.serve; node:http with toNodeListener on Node).
 */
import type { HttpHandler } from "mneme/http";
import type { SqliteDriverName } from "mneme/sqlite";

export type RuntimeName = "bun" | "deno" | "node";

interface BunServer {
  readonly port: number;
  stop(closeActiveConnections?: boolean): Promise<void> | void;
}
interface BunGlobal {
  serve(options: { port: number; hostname: string; fetch: (request: Request) => Promise<Response> }): BunServer;
}
interface DenoServer {
  readonly addr: { port: number };
  shutdown(): Promise<void>;
  readonly finished: Promise<void>;
}
interface DenoGlobal {
  readonly version: { deno: string };
  serve(options: { port: number; hostname: string; onListen?: () => void }, handler: (request: Request) => Promise<Response>): DenoServer;
}

const bun = (): BunGlobal | undefined => (globalThis as { Bun?: BunGlobal }).Bun;
const deno = (): DenoGlobal | undefined => (globalThis as { Deno?: DenoGlobal }).Deno;

/** The runtime this code executes on (Bun and Deno also set process.versions.node, so they are asked first). */
export function currentRuntime(): RuntimeName {
  if (bun() !== undefined && typeof process.versions.bun === "string") return "bun";
  if (deno() !== undefined) return "deno";
  return "node";
}

/** The runtime and its version, for the log. */
export function runtimeVersion(): string {
  const d = deno();
  if (d !== undefined) return `deno ${d.version.deno}`;
  if (typeof process.versions.bun === "string") return `bun ${process.versions.bun}`;
  return `node ${process.versions.node}`;
}

/** The runtime's own SQLite: bun:sqlite on Bun, node:sqlite on Deno and Node (no driver package). */
export function runtimeSqliteDriver(): SqliteDriverName {
  return currentRuntime() === "bun" ? "bun:sqlite" : "node:sqlite";
}

export interface Served {
  readonly url: string;
  /** Which server serves it. */
  readonly server: "Bun.serve" | "Deno.serve" | "node:http";
  close(): Promise<void>;
}

/**
 * Serves `handler` on 127.0.0.1 with a free port, by the runtime's own HTTP
 * server, or with `via: "node:http"` by the runtime's node:http and
 * toNodeListener (what Express, Fastify and NestJS hosts use).
 */
export async function serveFetch(handler: HttpHandler, via: "native" | "node:http" = "native"): Promise<Served> {
  const b = via === "native" ? bun() : undefined;
  if (b !== undefined) {
    const server = b.serve({ port: 0, hostname: "127.0.0.1", fetch: handler });
    return { url: `http://127.0.0.1:${server.port}`, server: "Bun.serve", close: async () => void (await server.stop(true)) };
  }
  const d = via === "native" ? deno() : undefined;
  if (d !== undefined) {
    const server = d.serve({ port: 0, hostname: "127.0.0.1", onListen: () => undefined }, handler);
    return { url: `http://127.0.0.1:${server.addr.port}`, server: "Deno.serve", close: () => server.shutdown() };
  }
  const { createServer } = await import("node:http");
  const { toNodeListener } = await import("mneme/http");
  const listener = toNodeListener(handler);
  const server = createServer((req, res) => void listener(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("node:http did not listen on a port");
  return {
    url: `http://127.0.0.1:${address.port}`,
    server: "node:http",
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
