/**
 * NATS for tests: a connection to the machine's server (DATABASE_URL's
 * sibling, NATS_URL, default 127.0.0.1:4222), streams with names of their own
 * that are deleted after the test file, and private servers (own port, own
 * storage folder) that a test may stop and start again.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager, type JsMsg } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll } from "vitest";
import { newUuid } from "mneme";

export const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const NATS_SERVER = process.env.NATS_SERVER ?? "/usr/sbin/nats-server";

/**
 * What the helpers made, undone after the test file, last first. vitest runs
 * no afterAll registered inside a test, and the helpers are called there
 * (private servers were left running): one afterAll, registered at import, undoes them all.
 */
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const undo of cleanups.splice(0).reverse()) await undo().catch(() => undefined);
}, 60_000);

/** A fresh name for a stream and its subjects. */
export function streamName(prefix: string): string {
  return `${prefix}_${newUuid().replace(/-/g, "").slice(-10)}`.toUpperCase();
}

/** Connects (reconnecting forever) and closes the connection after the test file. */
export async function natsConnection(servers = NATS_URL): Promise<NatsConnection> {
  const nc = await connect({ servers, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  cleanups.push(() => nc.close());
  return nc;
}

/** Makes a file-stored stream of the subjects `<name>.>`, deleted after the test file. */
export async function makeStream(nc: NatsConnection, name: string): Promise<void> {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name, subjects: [`${name}.>`], storage: "file" as never, duplicate_window: 120e9 });
  cleanups.push(async () => {
    if (nc.isClosed()) return;
    await (await jetstreamManager(nc)).streams.delete(name);
  });
}

/** Every message of `stream`, in stream order. */
export async function streamMessages(nc: NatsConnection, stream: string): Promise<JsMsg[]> {
  const jsm = await jetstreamManager(nc);
  const total = (await jsm.streams.info(stream)).state.messages;
  const out: JsMsg[] = [];
  if (total === 0) return out;
  const c = await jetstream(nc).consumers.get(stream);
  const it = await c.fetch({ max_messages: total, expires: 5000 });
  for await (const m of it) {
    out.push(m);
    if (out.length === total) break;
  }
  return out;
}

/** How many messages `stream` holds. */
export async function streamCount(nc: NatsConnection, stream: string): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(stream)).state.messages;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const a = s.address();
      s.close(() => (typeof a === "object" && a !== null ? resolve(a.port) : reject(new Error("no port"))));
    });
  });
}

/** A private nats-server with JetStream (its own port and storage folder) that a test may stop and start. */
export interface PrivateNats {
  readonly url: string;
  start(): Promise<void>;
  /** Kills it with SIGKILL (what a crash of the server does). */
  kill(): Promise<void>;
}

export async function privateNats(): Promise<PrivateNats> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "mneme-nats-"));
  let proc: ChildProcess | undefined;
  const url = `127.0.0.1:${port}`;
  const server: PrivateNats = {
    url,
    async start() {
      proc = spawn(NATS_SERVER, ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", dir], { stdio: "ignore" });
      for (let i = 0; i < 200; i++) {
        try {
          const nc = await connect({ servers: url, maxReconnectAttempts: 0, timeout: 200 });
          await (await jetstreamManager(nc)).getAccountInfo();
          await nc.close();
          return;
        } catch {
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      throw new Error(`nats-server on ${url} did not start`);
    },
    async kill() {
      const p = proc;
      proc = undefined;
      if (p === undefined || p.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        p.once("exit", () => resolve());
        p.kill("SIGKILL");
      });
    },
  };
  cleanups.push(async () => {
    await server.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  return server;
}
