/**
 * Two Postgres servers in synchronous replication, made with Debian's
 * postgresql-common tools (pg_createcluster, pg_ctlcluster, pg_basebackup) for
 * failover tests: kill the primary, promote the standby, let the old primary
 * rejoin as the new one's standby, and again. Each pair has clusters of its
 * own (unique names, free ports) and `drop()` removes them.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readdir, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { promisify } from "node:util";
import pg from "pg";

const run = promisify(execFile);

/** The newest Postgres major installed under /usr/lib/postgresql, when the Debian cluster tools are there. */
export function clusterTools(): { version: string } | undefined {
  if (!existsSync("/usr/bin/pg_createcluster") || !existsSync("/usr/lib/postgresql")) return undefined;
  const versions = readdirSync("/usr/lib/postgresql").filter((v) => /^\d+$/.test(v) && existsSync(`/usr/lib/postgresql/${v}/bin/postgres`));
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  return newest === undefined ? undefined : { version: newest };
}

/** A command as the postgres OS user (clusters are owned by it; root may not run the server's tools). */
async function asPostgres(cmd: string, args: string[]): Promise<void> {
  if (process.getuid?.() === 0) await run("runuser", ["-u", "postgres", "--", cmd, ...args]);
  else await run(cmd, args);
}

/**
 * Ports claimed by the clusters of this machine's test processes: a file per port, made exclusively, removed by
 * `drop()`. A cluster keeps its port while it is stopped (a failover test restarts the old primary on it), and
 * test files run side by side in several processes: a port that is merely free at the moment is not enough.
 */
const CLAIMED_PORTS = "/tmp/mneme-test-pg-ports";

function claimPort(port: number): boolean {
  mkdirSync(CLAIMED_PORTS, { recursive: true });
  const file = `${CLAIMED_PORTS}/${String(port)}`;
  try {
    writeFileSync(file, String(process.pid), { flag: "wx" });
    return true;
  } catch {
    // Claimed: by a live process, or left by one that died (then taken over).
    const owner = Number(readFileSync(file, "utf8"));
    if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && processAlive(owner)) return false;
    writeFileSync(file, String(process.pid));
    return true;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function releasePort(port: number): void {
  rmSync(`${CLAIMED_PORTS}/${String(port)}`, { force: true });
}

async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 55_000 + Math.floor(Math.random() * 900);
    const free = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once("error", () => resolve(false));
      s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
    });
    if (free && !existsSync(`/var/run/postgresql/.s.PGSQL.${String(port)}`) && claimPort(port)) return port;
  }
  throw new Error("no free port in 55000-55899");
}

/** One server of the pair. */
export class Node {
  constructor(
    readonly version: string,
    readonly name: string,
    readonly port: number,
  ) {}

  get dataDir(): string {
    return `/var/lib/postgresql/${this.version}/${this.name}`;
  }

  /** An admin connection string (trust auth on 127.0.0.1). */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${String(this.port)}/postgres`;
  }

  async ctl(action: "start" | "promote" | "reload"): Promise<void> {
    await run("pg_ctlcluster", ["--skip-systemctl-redirect", this.version, this.name, action]);
  }

  /** Stops the server: `fast` (a clean shutdown), `immediate` (no checkpoint: a crash), or `kill` (SIGKILL of the postmaster). */
  async stop(mode: "fast" | "immediate" | "kill"): Promise<void> {
    if (mode !== "kill") {
      await run("pg_ctlcluster", ["--skip-systemctl-redirect", this.version, this.name, "stop", "-m", mode]);
      return;
    }
    const pid = Number(readFileSync(`${this.dataDir}/postmaster.pid`, "utf8").split("\n")[0]);
    process.kill(pid, "SIGKILL");
    // Its backends notice the postmaster's death and exit; the port is free once the postmaster is gone.
    await until(async () => !(await this.reachable()), `${this.name} is down after SIGKILL`);
    // And gone for good: until its parent reaps it, a killed postmaster still answers kill(pid, 0), and a new
    // server on its port refuses to start ("lock file already exists": seen in CI when reaping was slow).
    await until(() => Promise.resolve(!processAlive(pid)), `${this.name}'s postmaster ${String(pid)} is reaped`);
  }

  /** True when a connection to the server succeeds. */
  async reachable(): Promise<boolean> {
    const c = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 2000 });
    c.on("error", () => {});
    try {
      await c.connect();
      return true;
    } catch {
      return false;
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /** One statement on a connection of its own. */
  async query<R extends pg.QueryResultRow>(text: string): Promise<R[]> {
    const c = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 5000 });
    c.on("error", () => {});
    try {
      await c.connect();
      return (await c.query<R>(text)).rows;
    } finally {
      await c.end().catch(() => undefined);
    }
  }

  /** Turns synchronous replication to any standby on or off (a conf.d file: it is not copied by pg_basebackup). */
  async setSynchronous(on: boolean): Promise<void> {
    const file = `/etc/postgresql/${this.version}/${this.name}/conf.d/mneme-sync.conf`;
    if (on) await writeFile(file, "synchronous_standby_names = '*'\nsynchronous_commit = on\n");
    else await rm(file, { force: true });
  }

  /** Makes this node a fresh standby of `primary` (pg_basebackup -R), then starts it. */
  async followFresh(primary: Node): Promise<void> {
    await this.setSynchronous(false);
    // Emptied, not removed: its parent belongs to root, and pg_basebackup fills an empty directory.
    for (const entry of await readdir(this.dataDir)) await rm(`${this.dataDir}/${entry}`, { recursive: true, force: true });
    await asPostgres("pg_basebackup", [
      "-h",
      "127.0.0.1",
      "-p",
      String(primary.port),
      "-U",
      "postgres",
      "-D",
      this.dataDir,
      "-R",
      "-X",
      "stream",
      "-c",
      "fast",
      "--no-sync",
    ]);
    await this.ctl("start");
  }

  async drop(): Promise<void> {
    await run("pg_dropcluster", ["--stop", this.version, this.name]).catch(async () => {
      // A cluster whose postmaster was killed may refuse --stop: remove what is left.
      await run("pg_dropcluster", [this.version, this.name]).catch(() => undefined);
    });
    releasePort(this.port);
  }
}

async function until(cond: () => Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

/** A primary and a synchronous standby that swap roles at each failover. */
export class ReplicatedPair {
  private constructor(
    public primary: Node,
    public standby: Node,
  ) {}

  /** Both nodes, in the order they were made (a connection string lists them so). */
  readonly nodes: Node[] = [];

  /** Creates and starts the primary, then its standby, and waits until the standby is synchronous. Drops both when that fails. */
  static async create(prefix: string): Promise<ReplicatedPair> {
    const tools = clusterTools();
    if (tools === undefined) throw new Error("pg_createcluster is not installed");
    const id = `${prefix}_${String(process.pid)}_${Math.random().toString(36).slice(2, 8)}`;
    const a = new Node(tools.version, `${id}_a`, await freePort());
    const b = new Node(tools.version, `${id}_b`, await freePort());
    const pair = new ReplicatedPair(a, b);
    pair.nodes.push(a, b);
    try {
      for (const n of [a, b]) await createCluster(n);
      await a.setSynchronous(true);
      await a.ctl("start");
      await b.followFresh(a);
      await pair.waitSynchronous();
    } catch (e) {
      await pair.drop();
      throw e;
    }
    return pair;
  }

  /**
   * Waits until the primary has its standby as synchronous and that standby
   * has flushed everything the primary wrote before: from then on, every
   * acknowledged commit is on both servers.
   */
  async waitSynchronous(): Promise<void> {
    const p = this.primary;
    await until(async () => {
      const rows = await p.query<{ sync_state: string; state: string }>("SELECT sync_state, state FROM pg_stat_replication");
      return rows.some((r) => r.sync_state === "sync" && r.state === "streaming");
    }, `${this.standby.name} is the synchronous standby of ${p.name}`);
    const [head] = await p.query<{ lsn: string }>("SELECT pg_current_wal_lsn()::text AS lsn");
    await until(async () => {
      const [r] = await p.query<{ behind: boolean }>(
        `SELECT coalesce(bool_and(flush_lsn < '${head!.lsn}'::pg_lsn), true) AS behind FROM pg_stat_replication WHERE sync_state = 'sync'`,
      );
      return r?.behind === false;
    }, `${this.standby.name} has flushed ${head!.lsn}`);
  }

  /** Stops the primary (as `mode` says), promotes the standby and returns when it takes writes. The roles swap. */
  async failover(mode: "fast" | "immediate" | "kill"): Promise<void> {
    await this.primary.stop(mode);
    await this.standby.ctl("promote");
    [this.primary, this.standby] = [this.standby, this.primary];
  }

  /** The old primary rejoins as a fresh standby of the new one, which then commits synchronously again. */
  async rejoin(): Promise<void> {
    await this.standby.followFresh(this.primary);
    await this.primary.setSynchronous(true);
    await this.primary.ctl("reload");
    await this.waitSynchronous();
  }

  async drop(): Promise<void> {
    for (const n of this.nodes) await n.drop();
  }
}

async function createCluster(n: Node): Promise<void> {
  await run("pg_createcluster", [n.version, n.name, "--port", String(n.port), "--start-conf", "manual", "--", "--auth=trust"]);
  // fsync off: the tests kill server processes, not the machine (the OS keeps what they wrote).
  const settings = [
    "listen_addresses = '127.0.0.1'",
    "wal_level = replica",
    "max_wal_senders = 10",
    "wal_keep_size = '256MB'",
    "max_connections = 60",
    "shared_buffers = '16MB'",
    "fsync = off",
  ];
  await writeFile(`/etc/postgresql/${n.version}/${n.name}/conf.d/mneme-test.conf`, `${settings.join("\n")}\n`);
}

/** A single server of its own (a unique name, a free port), started; `drop()` it after. */
export async function startCluster(prefix: string): Promise<Node> {
  const tools = clusterTools();
  if (tools === undefined) throw new Error("pg_createcluster is not installed");
  const n = new Node(tools.version, `${prefix}_${String(process.pid)}_${Math.random().toString(36).slice(2, 8)}`, await freePort());
  try {
    await createCluster(n);
    await n.ctl("start");
    await until(() => n.reachable(), `${n.name} accepts connections`);
    return n;
  } catch (e) {
    await n.drop();
    throw e;
  }
}
