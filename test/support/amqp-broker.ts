/**
 * RabbitMQ for tests: connections to the machine's broker (AMQP_URL, default
 * amqp://guest:guest@127.0.0.1:5672), exchange and queue names of their own
 * that are deleted after the test file, reading a queue's messages, and
 * private RabbitMQ nodes (own node name, ports and data folder) that a test
 * may stop and start again.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import amqp, { type Channel, type ChannelModel, type GetMessage, type RecoveringChannelModel } from "amqplib";
import { afterAll } from "vitest";
import { newUuid } from "mneme";

export const AMQP_URL = process.env.AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";

/**
 * What the helpers made, undone after the test file, last first. vitest runs
 * no afterAll registered inside a test, and the helpers are called there: so
 * one afterAll, registered when the file imports this module, undoes them all.
 */
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const undo of cleanups.splice(0).reverse()) await undo().catch(() => undefined);
}, 120_000);

/** A fresh name for an exchange or queue. */
export function amqpName(prefix: string): string {
  return `mneme-test.${prefix}.${newUuid().replace(/-/g, "").slice(-10)}`;
}

/** A recovering connection (it reconnects by itself), closed after the test file. */
export async function amqpConnection(url = AMQP_URL): Promise<RecoveringChannelModel> {
  const conn = await amqp.connect(url, { recovery: { initialDelay: 50, maxDelay: 500 } });
  conn.on("error", () => undefined);
  cleanups.push(() => conn.close());
  return conn;
}

/** A plain channel for the test's own declarations and reads, on a connection of its own, closed after the file. */
export async function adminChannel(url = AMQP_URL): Promise<Channel> {
  const conn: ChannelModel = await amqp.connect(url);
  conn.on("error", () => undefined);
  const ch = await conn.createChannel();
  ch.on("error", () => undefined);
  cleanups.push(() => conn.close());
  return ch;
}

/** Declares a durable exchange (deleted after the file, on `ch`'s connection). */
export async function makeExchange(ch: Channel, name: string, type = "topic"): Promise<void> {
  await ch.assertExchange(name, type, { durable: true });
  cleanups.push(() => ch.deleteExchange(name));
}

/** Declares a durable queue bound to `exchange` with `pattern` (deleted after the file). */
export async function makeQueue(
  ch: Channel,
  name: string,
  exchange?: string,
  pattern = "#",
  args?: Record<string, unknown>,
): Promise<void> {
  await ch.assertQueue(name, { durable: true, ...(args === undefined ? {} : { arguments: args }) });
  if (exchange !== undefined) await ch.bindQueue(name, exchange, pattern);
  cleanups.push(() => ch.deleteQueue(name));
}

/** Every message of `queue`, in queue order, taken off it (acked). */
export async function drainQueue(ch: Channel, queue: string): Promise<GetMessage[]> {
  const out: GetMessage[] = [];
  for (;;) {
    const m = await ch.get(queue, { noAck: true });
    if (m === false) return out;
    out.push(m);
  }
}

/** How many messages `queue` holds ready. */
export async function queueCount(ch: Channel, queue: string): Promise<number> {
  return (await ch.checkQueue(queue)).messageCount;
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

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer().once("error", () => resolve(true));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(false)));
  });
}

/** A private RabbitMQ node (own node name, AMQP and distribution ports, data folder) that a test may stop and start. */
export interface PrivateRabbit {
  readonly url: string;
  start(): Promise<void>;
  /** Stops it (`rabbitmqctl stop`): every connection to it is cut. Its durable queues and persistent messages stay. */
  stop(): Promise<void>;
}

const run = promisify(execFile);

/** Starts a RabbitMQ node of its own; it runs as the rabbitmq user, so its folder is that user's. */
export async function privateRabbit(): Promise<PrivateRabbit> {
  const port = await freePort();
  const distPort = await freePort();
  const node = `mneme-${process.pid}-${port}@localhost`;
  const dir = mkdtempSync(join(tmpdir(), "mneme-rabbit-"));
  writeFileSync(join(dir, "rabbitmq.conf"), `listeners.tcp.local = 127.0.0.1:${port}\nloopback_users = none\n`);
  writeFileSync(join(dir, "enabled_plugins"), "[].\n");
  chownRabbit(dir);
  const env = {
    ...process.env,
    RABBITMQ_NODENAME: node,
    RABBITMQ_NODE_PORT: String(port),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_CONFIG_FILE: join(dir, "rabbitmq.conf"),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, "enabled_plugins"),
    RABBITMQ_MNESIA_BASE: join(dir, "mnesia"),
    RABBITMQ_LOG_BASE: join(dir, "log"),
    RABBITMQ_PID_FILE: join(dir, "pid"),
  };
  let proc: ChildProcess | undefined;
  const server: PrivateRabbit = {
    url: `amqp://guest:guest@127.0.0.1:${port}`,
    async start() {
      proc = spawn("rabbitmq-server", [], { env, stdio: "ignore", cwd: dir });
      for (let i = 0; i < 240; i++) {
        if (await portOpen(port)) {
          try {
            const c = await amqp.connect(server.url);
            await c.close();
            return;
          } catch {
            // Listening, not yet taking connections.
          }
        }
        await new Promise((r) => setTimeout(r, 250));
      }
      throw new Error(`RabbitMQ node ${node} did not start`);
    },
    async stop() {
      const p = proc;
      proc = undefined;
      if (p === undefined || p.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => p.once("exit", () => resolve()));
      await run("rabbitmqctl", ["-n", node, "stop"], { env }).catch(() => p.kill("SIGKILL"));
      await exited;
    },
  };
  cleanups.push(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return server;
}

/** The rabbitmq-server script runs the node as the rabbitmq user (when started by root): the folder must be that user's. */
function chownRabbit(dir: string): void {
  if (process.getuid?.() !== 0) return;
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith("rabbitmq:"));
  if (line === undefined) return;
  const [, , uid, gid] = line.split(":");
  for (const p of [dir, join(dir, "rabbitmq.conf"), join(dir, "enabled_plugins")]) chownSync(p, Number(uid), Number(gid));
}
