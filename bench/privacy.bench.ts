/**
 * What personal data costs: a ProjectionReadmodel restored from zero over
 * 100,000 stored events (BENCH_QUICK=1: 20,000) on SQLite whose name and
 * email are sealed per subject (1,000 subjects: every field opened with
 * AES-256-GCM, keys fetched once per page and then cached), against the same
 * restore over the same number of events of a type without personal data, on
 * the same file in the same run, rounds alternating. Also the appends that
 * wrote them (sealing included, keys made beforehand: the making of 1,000
 * keys is measured apart). The ratios are events/s with personal data over
 * without.
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

interface Paid {
  customerUuid: string;
  name: string;
  email: string;
  amount: number;
}
interface Customer {
  total: number;
  name: string;
  email: string;
}

function shop() {
  const D = defineDomain("Shop");
  D.event<Paid>("PaidPersonal", { personalData: { subject: (p) => p.customerUuid, fields: ["name", "email"] } });
  D.event<Paid>("PaidPlain");
  const evolve = (s: Customer, p: Paid): Customer => ({ total: s.total + p.amount, name: p.name, email: p.email });
  const Personal = D.aggregate<Customer>("CustomerPersonal", {
    initialState: () => ({ total: 0, name: "", email: "" }),
    evolve: { PaidPersonal: evolve },
  });
  const Plain = D.aggregate<Customer>("CustomerPlain", {
    initialState: () => ({ total: 0, name: "", email: "" }),
    evolve: { PaidPlain: evolve },
  });
  return { D, Personal, Plain };
}

const customerUuid = (i: number, kind: "personal" | "plain"): string =>
  `0190a7a2-0000-7000-8${kind === "personal" ? "1" : "2"}00-${String(i).padStart(12, "0")}`;

export default async function privacyBench(b: Bench): Promise<void> {
  const events = b.quick ? 20_000 : 100_000;
  const customers = 1_000;
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-privacy-"));
  const filename = join(dir, "privacy.db");
  try {
    const writer = createFacade({ appName: "bench-privacy", ...createSqliteBackends({ filename }) }).registerDomain(shop().D);
    await writer.start();
    // Keys are made on a subject's first event: measured apart (one key-store write each), then the steady state.
    const first: NewEvent[] = [];
    for (let j = 0; j < customers; j++) {
      const c = customerUuid(j, "personal");
      first.push({
        domain: "Shop",
        name: "PaidPersonal",
        aggregateUuid: c,
        payload: { customerUuid: c, name: "n", email: "e", amount: 0 },
      });
    }
    const tk = performance.now();
    await writer.personalData.encrypt(first);
    b.record(
      "privacy",
      "sqlite: first event of a new subject (key made and stored)",
      customers,
      (performance.now() - tk) / 1000,
      "subjects/s",
    );
    const appendSeconds = { personal: 0, plain: 0 };
    for (let i = 0; i < events; i += 1_000) {
      for (const kind of ["personal", "plain"] as const) {
        const batch: NewEvent[] = [];
        for (let j = i; j < i + 1_000; j++) {
          const c = customerUuid(j % customers, kind);
          batch.push({
            domain: "Shop",
            name: kind === "personal" ? "PaidPersonal" : "PaidPlain",
            aggregateUuid: c,
            payload: {
              customerUuid: c,
              name: `Customer Number${j % customers}`,
              email: `customer${j % customers}@example.org`,
              amount: 1 + (j % 7),
            },
            tenantUuid: TENANT,
            reqCtx,
          });
        }
        const t0 = performance.now();
        await writer.eventRepository.append(batch);
        appendSeconds[kind] += (performance.now() - t0) / 1000;
      }
    }
    await writer.stop();
    const appendPlain = b.record("privacy", `sqlite: append 1,000 per call, no personal data`, events, appendSeconds.plain, "events/s");
    const appendSealed = b.record("privacy", `sqlite: append 1,000 per call, 2 fields sealed`, events, appendSeconds.personal, "events/s");
    b.compare(appendSealed, appendPlain);

    const seconds = { personal: 0, plain: 0 };
    const rounds = 3;
    for (let r = 0; r < rounds; r++) {
      for (const kind of ["personal", "plain"] as const) {
        const s = shop();
        const f: Facade = createFacade({ appName: `bench-privacy-${kind}`, ...createSqliteBackends({ filename }) }).registerDomain(s.D);
        const name = kind === "personal" ? "CustomersPersonal" : "CustomersPlain";
        const projection = new ProjectionReadmodel(f, { aggregate: kind === "personal" ? s.Personal : s.Plain, name });
        f.registerReadmodel(projection);
        await f.start();
        const t0 = performance.now();
        await f.runtime.controlEventHandler({ eventHandlerName: name, action: "restore", restoreFromZero: true });
        seconds[kind] += (performance.now() - t0) / 1000;
        const sample = await projection.getModel(customerUuid(1, kind));
        if (sample === undefined || sample.version !== events / customers || sample.model.email !== "customer1@example.org") {
          throw new Error(`restore incomplete or not decrypted: ${JSON.stringify(sample)}`);
        }
        await f.stop();
      }
    }
    const plain = b.record(
      "privacy",
      `sqlite: restore from zero, no personal data (${events} events)`,
      events * rounds,
      seconds.plain,
      "events/s",
    );
    const sealed = b.record(
      "privacy",
      `sqlite: restore from zero, 2 fields opened (${events} events)`,
      events * rounds,
      seconds.personal,
      "events/s",
    );
    b.compare(sealed, plain);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
