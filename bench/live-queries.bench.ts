/**
 * What one update of a live query costs (docs/http.md, "Live queries"): N
 * subscribers of one query, payload and tenant (`share: "tenant"`, each with
 * a session of its own, over HTTP on node:http, the clients in a child
 * process: bench/live-queries-clients.ts) while commands add items one at a
 * time, each waiting for its readmodel batch and for the evaluation that
 * follows (so batches are not coalesced). Prints, per N, this process's CPU
 * time per batch minus that of the same batches with no subscriber (the
 * update's cost), the query's own CPU time (`facade.query` alone, same
 * readmodel), how many times the query ran per batch, and the cost left per
 * subscriber (its session resolved again and the permission checked, as
 * before every push, and the write). Every client must end at the last count.
 * BENCH_QUICK=1: up to 100 subscribers, fewer batches.
 */
import { fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { MnemeError, ProjectionReadmodel, createFacade, defineDomain, type Facade, type RequestContext } from "../src/index.js";
import { createHttpHandler, toNodeListener } from "../src/http/index.js";
import { sessionOf } from "./live-queries-clients.js";
import type { Bench } from "./harness.js";

const TENANT = "0190a7a2-7d3c-7b5e-9f00-1234567890ae";
const WRITER: RequestContext = {
  senderAccountUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ab",
  senderSessionUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ac",
  senderIdentityUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ad",
  senderTenantUuid: TENANT,
  targetTenantUuid: TENANT,
};

interface ItemState {
  exists: boolean;
}
const Board = defineDomain("Board");
const AddItem = Board.command<{ itemUuid: string }>("AddItem");
const ItemAdded = Board.event<{ at: number }>("ItemAdded");
const Item = Board.aggregate<ItemState>("Item", {
  initialState: () => ({ exists: false }),
  evolve: { ItemAdded: (s) => ({ ...s, exists: true }) },
});
const CountItems = Board.query<Record<string, never>, { count: number }>("CountItems", {
  live: { share: "tenant", readmodels: ["ItemProjection"] },
});
const queryRuns = { count: 0 };

class ItemProjection extends ProjectionReadmodel<ItemState> {
  constructor(facade: Facade) {
    super(facade, { aggregate: Item, name: "ItemProjection" });
  }
}

async function boardFacade(): Promise<Facade> {
  const facade = createFacade({ appName: "live-queries-bench" });
  const items = new ItemProjection(facade);
  facade.registerDomain(Board, (d) => {
    d.handleCommand(AddItem, async (ctx, _c, p) => {
      if ((await ctx.aggregates.load(Item, p.itemUuid)).state.exists) throw new MnemeError("CONFLICT", "exists");
      return [ItemAdded.create(p.itemUuid, { at: Date.now() })];
    });
    d.handleQuery(CountItems, async (ctx) => {
      queryRuns.count++;
      return { count: (await ctx.readmodel(items).getModelList({ pageSize: 1 })).total };
    });
  });
  facade.registerReadmodel(items);
  await facade.start();
  return facade;
}

const cpuMicros = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

let itemNo = 0;
const addItem = (facade: Facade) =>
  facade.dispatch(
    AddItem,
    { itemUuid: `0190a7a2-7d3c-7b5e-9f03-${String(++itemNo).padStart(12, "0")}` },
    { reqCtx: WRITER, waitToFinish: true },
  );

interface Side {
  cpuPerBatch: number;
  wallPerBatch: number;
  queryPerBatch: number;
  runsPerBatch: number;
  reached: number;
}

/** `batches` commands with `n` subscribers open; each waits for its batch and (n > 0) for the evaluation and pushes after it. */
async function measure(n: number, warmup: number, batches: number): Promise<Side> {
  const facade = await boardFacade();
  const handler = createHttpHandler(facade, {
    resolveCredentials: async (_f, c) => {
      const i = Number(c.sessionUuid.slice(-12));
      const s = sessionOf(i);
      if (`${c.sessionUuid}.${c.sessionKey}` !== s.token || c.identityUuid !== s.identity) return undefined;
      return {
        senderAccountUuid: `0190a7a2-7d3c-7b5e-9f04-${c.sessionUuid.slice(-12)}`,
        senderSessionUuid: c.sessionUuid,
        senderIdentityUuid: c.identityUuid,
        senderTenantUuid: TENANT,
      };
    },
    sse: { maxConnections: n + 10 },
  });
  const listener = toNodeListener(handler);
  const server = createServer((req, res) => void listener(req, res));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  const child =
    n === 0
      ? undefined
      : fork(
          fileURLToPath(new URL("live-queries-clients.ts", import.meta.url)),
          [`http://127.0.0.1:${port}/api/tenants/${TENANT}/queries/Board/CountItems/live`, String(n)],
          {
            execArgv: ["--import", "tsx"],
          },
        );
  const next = (kind: string) =>
    new Promise<Record<string, number>>((resolve) => {
      const on = (m: Record<string, unknown>) => {
        if (m.kind !== kind) return;
        child!.off("message", on);
        resolve(m as Record<string, number>);
      };
      child!.on("message", on);
    });
  if (child !== undefined) await next("ready");
  const oneBatch = async () => {
    const runs = queryRuns.count;
    await addItem(facade);
    if (n === 0) return;
    while (queryRuns.count === runs) await new Promise((r) => setImmediate(r));
    // The query ran; its result is pushed in the same continuation: one more turn and the writes are out.
    await new Promise((r) => setImmediate(r));
  };
  for (let i = 0; i < warmup; i++) await oneBatch();
  const runs0 = queryRuns.count;
  const cpu0 = cpuMicros();
  const t0 = performance.now();
  for (let i = 0; i < batches; i++) await oneBatch();
  const wall = performance.now() - t0;
  const cpu = cpuMicros() - cpu0;
  const runs = queryRuns.count - runs0;
  // The query alone, on the same readmodel, as many times.
  const q0 = cpuMicros();
  for (let i = 0; i < batches; i++) await facade.query(CountItems, {}, { reqCtx: WRITER });
  const query = cpuMicros() - q0;
  let reached = 0;
  if (child !== undefined) {
    const done = next("done");
    child.send({ kind: "finish", expected: warmup + batches });
    reached = (await done).reached!;
  }
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  await facade.stop();
  return {
    cpuPerBatch: cpu / batches,
    wallPerBatch: (wall * 1000) / batches,
    queryPerBatch: query / batches,
    runsPerBatch: runs / batches,
    reached,
  };
}

export default async function liveQueriesBench(b: Bench): Promise<void> {
  const sizes = b.quick ? [1, 100] : [1, 100, 1000];
  const batches = b.quick ? 100 : 300;
  console.log(`  load average before: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
  const none = await measure(0, 20, batches);
  b.value("live-queries", "batch with no live subscriber: CPU", none.cpuPerBatch, "µs/batch");
  for (const n of sizes) {
    const s = await measure(n, 20, batches);
    const update = s.cpuPerBatch - none.cpuPerBatch;
    b.value(
      "live-queries",
      `${n} subscribers, one group: update CPU per batch`,
      update,
      "µs",
      `query alone ${s.queryPerBatch.toFixed(0)} µs`,
    );
    b.value("live-queries", `${n} subscribers, one group: query runs per batch`, s.runsPerBatch, "runs");
    b.value("live-queries", `${n} subscribers, one group: update beyond the query, per subscriber`, (update - s.queryPerBatch) / n, "µs");
    b.value("live-queries", `${n} subscribers, one group: batch to every push, wall`, s.wallPerBatch / 1000, "ms");
    b.value("live-queries", `${n} subscribers, one group: streams at the last count`, s.reached, `of ${n}`);
  }
  console.log(`  load average after: ${readFileSync("/proc/loadavg", "utf8").trim()}`);
}
