/**
 * What upcasting costs a restore: a ProjectionReadmodel restored from zero
 * over 100,000 stored events (BENCH_QUICK=1: 20,000) on SQLite, once by a
 * release whose event is at version 3 (every stored event goes through a
 * two-step upcaster chain, 1 -> 2 -> 3) and once by the release that wrote
 * them (version 1, nothing to upcast), on the same file in the same run,
 * rounds alternating. The ratio is events/s with upcasting over without.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFacade, type Facade } from "../src/app/facade.js";
import { defineDomain } from "../src/model/domain.js";
import type { NewEvent } from "../src/model/types.js";
import { ProjectionReadmodel } from "../src/readmodel/projection-readmodel.js";
import { createSqliteBackends } from "../src/sqlite/sqlite-backends.js";
import { BENCH_REQ_CTX as reqCtx, BENCH_TENANT as TENANT, type Bench } from "./harness.js";

interface V1 {
  name: string;
  amount: number;
}
interface V3 {
  first: string;
  last: string;
  amount: number;
  currency: string;
}

function release(version: 1 | 3) {
  const D = defineDomain("Shop");
  if (version === 1) {
    D.event<V1>("Paid");
    const Customer = D.aggregate<{ total: number; name: string }>("Customer", {
      initialState: () => ({ total: 0, name: "" }),
      evolve: { Paid: (s, p: V1) => ({ total: s.total + p.amount, name: p.name }) },
    });
    return { D, Customer };
  }
  D.event<V3>("Paid", {
    version: 3,
    upcasters: {
      1: (p: V1) => {
        const space = p.name.indexOf(" ");
        return { first: space < 0 ? p.name : p.name.slice(0, space), last: space < 0 ? "" : p.name.slice(space + 1), amount: p.amount };
      },
      2: (p: Omit<V3, "currency">) => ({ ...p, currency: "EUR" }),
    },
  });
  const Customer = D.aggregate<{ total: number; name: string }>("Customer", {
    initialState: () => ({ total: 0, name: "" }),
    evolve: { Paid: (s, p: V3) => ({ total: s.total + p.amount, name: `${p.first} ${p.last}` }) },
  });
  return { D, Customer };
}

export default async function upcastingBench(b: Bench): Promise<void> {
  const events = b.quick ? 20_000 : 100_000;
  const customers = 1_000;
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-upcast-"));
  const filename = join(dir, "upcast.db");
  try {
    // Written by release 1.
    const writer = createFacade({ appName: "bench-upcast", ...createSqliteBackends({ filename }) }).registerDomain(release(1).D);
    await writer.start();
    for (let i = 0; i < events; i += 1_000) {
      const batch: NewEvent[] = [];
      for (let j = i; j < i + 1_000; j++) {
        batch.push({
          domain: "Shop",
          name: "Paid",
          aggregateUuid: `0190a7a2-0000-7000-8000-${String(j % customers).padStart(12, "0")}`,
          payload: { name: `Customer Number${j % customers}`, amount: 1 + (j % 7) },
          tenantUuid: TENANT,
          reqCtx,
        });
      }
      await writer.eventRepository.append(batch);
    }
    await writer.stop();

    const seconds = { 1: 0, 3: 0 };
    const rounds = 3;
    for (let r = 0; r < rounds; r++) {
      for (const version of [3, 1] as const) {
        const rel = release(version);
        const f: Facade = createFacade({ appName: `bench-upcast-${version}`, ...createSqliteBackends({ filename }) }).registerDomain(rel.D);
        const projection = new ProjectionReadmodel(f, { aggregate: rel.Customer, name: `Customers${version}` });
        f.registerReadmodel(projection);
        await f.start();
        const t0 = performance.now();
        await f.runtime.controlEventHandler({ eventHandlerName: `Customers${version}`, action: "restore", restoreFromZero: true });
        seconds[version] += (performance.now() - t0) / 1000;
        const sample = await projection.getModel("0190a7a2-0000-7000-8000-000000000001");
        if (sample === undefined || sample.version !== events / customers) throw new Error(`restore incomplete: ${JSON.stringify(sample)}`);
        await f.stop();
      }
    }
    const plain = b.record(
      "upcasting",
      `sqlite: restore from zero, version 1 as stored (${events} events)`,
      events * rounds,
      seconds[1],
      "events/s",
    );
    const upcast = b.record(
      "upcasting",
      `sqlite: restore from zero, upcast 1 -> 2 -> 3 (${events} events)`,
      events * rounds,
      seconds[3],
      "events/s",
    );
    b.compare(upcast, plain);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
