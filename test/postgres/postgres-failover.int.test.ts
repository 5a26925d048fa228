/**
 * Postgres failover: two servers of our own in synchronous replication
 * (Debian's pg_createcluster, a standby by pg_basebackup -R), two facades
 * whose connection string lists both hosts. Under a loop of commands the
 * primary is stopped or killed and the standby promoted, again and again
 * (the old primary rejoins as a fresh standby each time): every acknowledged
 * command is stored exactly once, dispatch resumes within 10 s of each
 * promotion, and the readmodel applies every event exactly once (a document
 * per event counts its applications, written in the batch's transaction).
 *
 * Rounds: MNEME_FAILOVER_ROUNDS (default 20, about 80 s on a quiet 2-core
 * machine, 3 min 43 s at load average 5 to 13).
 * Skipped, saying why, when pg_createcluster (postgresql-common) is missing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BaseReadmodel, createFacade, isMnemeError, newUuid, type Event, type Facade } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { Counter, Increment, Incremented } from "../support/counter-domain.js";
import { clusterTools, type Node, ReplicatedPair } from "../support/pg-clusters.js";
import { rejection } from "../support/rejections.js";

const tools = clusterTools();
const skipped = tools === undefined ? " (skipped: pg_createcluster of Debian's postgresql-common is not installed)" : "";
const ROUNDS = Number(process.env.MNEME_FAILOVER_ROUNDS ?? 20);
const STOP_MODES = ["immediate", "kill", "fast"] as const;

/** One document per event: how many times a batch that committed applied it. */
class Applications extends BaseReadmodel {
  constructor(facade: Facade) {
    super(facade);
    this.domain = "Counter";
    this.name = "Applications";
    this.addDomainEventHandler(Incremented, async (_ctx, event) => {
      const docs = this.collection<{ eventUuid: string; position: number; count: number }>("applied");
      const count = ((await docs.get(event.eventUuid))?.count ?? 0) + 1;
      await docs.put(event.eventUuid, { eventUuid: event.eventUuid, position: event.position, count });
    });
  }

  async all(): Promise<{ eventUuid: string; position: number; count: number }[]> {
    const out: { eventUuid: string; position: number; count: number }[] = [];
    const docs = this.collection<{ eventUuid: string; position: number; count: number }>("applied");
    for (;;) {
      const page = await docs.list({ orderBy: "position", offset: out.length, limit: 500 });
      out.push(...page);
      if (page.length < 500) return out;
    }
  }
}

function hostsOf(...nodes: Node[]): string {
  return `postgres://postgres@${nodes.map((n) => `127.0.0.1:${String(n.port)}`).join(",")}/postgres`;
}

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

/** Waits until `position()` reaches `target`; fails only when it stops moving for 30 s (the machine may be slow, not stuck). */
async function untilProgress(position: () => number, target: number, what: string): Promise<void> {
  let last = position();
  let movedAt = Date.now();
  while (position() < target) {
    if (position() > last) {
      last = position();
      movedAt = Date.now();
    } else if (Date.now() - movedAt > 30_000) {
      throw new Error(`${what}: stuck at ${String(last)} of ${String(target)} for 30 s`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A command whose outcome is not known (the database went away), or still in progress under an older attempt: send it again. */
function sendAgain(e: unknown): boolean {
  return isMnemeError(e, "UNAVAILABLE") || (isMnemeError(e, "CONFLICT") && /is in progress/.test(e.message));
}

describe.skipIf(tools === undefined)(`Postgres failover to a promoted synchronous standby${skipped}`, () => {
  let pair: ReplicatedPair | undefined;
  const facades: Facade[] = [];
  beforeAll(async () => {
    pair = await ReplicatedPair.create("mneme_fo");
  }, 300_000);
  afterAll(async () => {
    for (const f of facades) await f.stop().catch(() => undefined);
    await pair?.drop();
  }, 120_000);

  function instance(schema: string): { facade: Facade; readmodel: Applications } {
    const p = pair!;
    const backends = createPostgresBackends({ connectionString: hostsOf(...p.nodes), schema, poolSize: 6, pollIntervalMs: 100 });
    const facade = createFacade({
      appName: "pg-failover",
      ...backends,
      // Catch-up in batches of 50 events: a batch commits (and shows its position) soon after a promotion.
      delivery: { lockRetryMs: 200, retryInitialMs: 20, retryMaxMs: 500, restoreBatchSize: 50 },
      idempotency: { leaseMs: 1500, waitMs: 300 },
    });
    facades.push(facade);
    facade.registerDomain(Counter);
    const readmodel = new Applications(facade);
    facade.registerReadmodel(readmodel);
    return { facade, readmodel };
  }

  it("works against the writable server in any host order; with none writable, UNAVAILABLE naming each host's state", async () => {
    const p = pair!;
    const schema = `mneme_fo_${newUuid().replace(/-/g, "").slice(-12)}`;
    // The standby first: a connection to it is refused as read-only, the primary is chosen.
    const backends = createPostgresBackends({ connectionString: hostsOf(p.standby, p.primary), schema });
    const facade = createFacade({ appName: "pg-failover-order", ...backends });
    facades.push(facade);
    facade.registerDomain(Counter);
    await facade.start();
    const res = await facade.dispatch(Increment, { counterUuid: newUuid(), by: 1 });
    const rows = await p.primary.query<{ n: string }>(`SELECT count(*)::text AS n FROM "${schema}".events`);
    expect(rows[0]!.n).toBe("1");
    expect((await backends.eventRepository.info()).connectionInfo).toContain(
      `127.0.0.1:${String(p.standby.port)},127.0.0.1:${String(p.primary.port)}`,
    );
    expect(res.events).toHaveLength(1);
    await facade.stop();

    // Only the standby and a port nobody listens on: nothing to write to.
    const nowhere = createPostgresBackends({
      connectionString: `postgres://postgres@127.0.0.1:${String(p.standby.port)},127.0.0.1:1/postgres`,
      schema,
    });
    const e = await rejection(nowhere.eventRepository.headPosition());
    expect(e.code, e.message).toBe("UNAVAILABLE");
    expect(e.message).toMatch(/no writable server/);
    expect(e.message).toContain(`127.0.0.1:${String(p.standby.port)} (in recovery)`);
    expect(e.message).toContain("127.0.0.1:1 (ECONNREFUSED)");
    await nowhere.close();
  });

  it(
    `follows ${String(ROUNDS)} promotions under a dispatch loop: nothing acknowledged is lost, dispatch resumes within 10 s, no event applied twice`,
    async () => {
      const p = pair!;
      const schema = `mneme_fo_${newUuid().replace(/-/g, "").slice(-12)}`;
      const instances = [instance(schema), instance(schema)];
      for (const i of instances) await i.facade.start();

      const acked: { commandUuid: string; at: number }[] = [];
      const failures: string[] = [];
      let sentAgain = 0;
      let running = true;
      const worker = async (facade: Facade): Promise<void> => {
        const counterUuid = newUuid();
        while (running) {
          // Each command is sent with its own uuid until it is acknowledged: a retry of one that did commit is a replay.
          const commandUuid = newUuid();
          for (let attempt = 0; ; attempt++) {
            try {
              await facade.dispatch(Increment, { counterUuid, by: 1 }, { commandUuid });
              acked.push({ commandUuid, at: Date.now() });
              // A pause between commands, so the readmodel (two statements per event) keeps pace on a busy machine.
              await new Promise((r) => setTimeout(r, 10));
              break;
            } catch (e) {
              if (!sendAgain(e) || attempt > 3000) {
                failures.push(String(e));
                return;
              }
              sentAgain++;
              await new Promise((r) => setTimeout(r, 25));
            }
          }
        }
      };
      const workers = Promise.all(instances.flatMap((i) => [worker(i.facade), worker(i.facade)]));

      const handlerPosition = (): number =>
        Math.max(
          ...instances.map((i) => i.facade.runtime.listEventHandlers().find((h) => h.eventHandlerName === "Applications")!.lastPosition),
        );
      const resumes: number[] = [];
      const catchUps: number[] = [];
      try {
        for (let round = 0; round < ROUNDS; round++) {
          const before = acked.length;
          await until(() => acked.length >= before + 20, `round ${String(round)}: commands are acknowledged`);
          const positionBefore = handlerPosition();
          await p.failover(STOP_MODES[round % STOP_MODES.length]!);
          const promotedAt = Date.now();
          await until(() => acked.some((a) => a.at >= promotedAt), `round ${String(round)}: dispatch resumes`, 30_000);
          resumes.push(acked.find((a) => a.at >= promotedAt)!.at - promotedAt);
          await until(() => handlerPosition() > positionBefore, `round ${String(round)}: the readmodel resumes`, 30_000);
          catchUps.push(Date.now() - promotedAt);
          // The old primary follows the new one, which commits synchronously again before the next round.
          await p.rejoin();
        }
      } finally {
        running = false;
        await workers;
      }
      console.log(
        `failover: ${String(ROUNDS)} promotions, ${String(acked.length)} commands, ${String(sentAgain)} sent again; ` +
          `dispatch resumed after ${resumes.join(", ")} ms; the readmodel after ${catchUps.join(", ")} ms`,
      );
      expect(failures).toEqual([]);
      for (const r of resumes) expect(r).toBeLessThan(10_000);

      // Every acknowledged command is stored, once; nothing else is.
      const events: Event[] = [];
      for await (const page of instances[0]!.facade.eventRepository.readAll()) events.push(...page);
      const perCommand = new Map<string, number>();
      for (const e of events) perCommand.set(e.commandUuid!, (perCommand.get(e.commandUuid!) ?? 0) + 1);
      expect(events).toHaveLength(acked.length);
      expect(acked.filter((a) => perCommand.get(a.commandUuid) !== 1)).toEqual([]);
      expect(events.map((e) => e.position)).toEqual(events.map((_, i) => i + 1));

      // The readmodel catches up and applied each event exactly once.
      const head = events.length;
      await untilProgress(handlerPosition, head, "the readmodel catches up");
      const docs = await instances[0]!.readmodel.all();
      expect(docs.filter((d) => d.count !== 1)).toEqual([]);
      expect(docs.map((d) => d.eventUuid).sort()).toEqual(events.map((e) => e.eventUuid).sort());
    },
    ROUNDS * 60_000 + 60_000,
  );
});
