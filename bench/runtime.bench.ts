/**
 * The Runtime on the request path: list calls and systemInfo over an app of
 * 10 domains, getSchema served from a schemas file loaded at createFacade,
 * and the fan-out of system events to 1,000 subscribers (against raw
 * eventemitter3 delivering the same events to the same number of listeners).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EventEmitter } from "eventemitter3";
import {
  createFacade,
  defineDomain,
  type DomainInstaller,
  type Facade,
  type JsonSchema,
  type RequestContext,
  type SystemEvent,
} from "../src/index.js";
import { SystemEventProducer } from "../src/runtime/system-events.js";
import type { Bench } from "./harness.js";

const DOMAINS = 10;
const PER_DOMAIN = 10;
const S2020 = "https://json-schema.org/draft/2020-12/schema";
const USER: RequestContext = { senderAccountUuid: "a", senderSessionUuid: "s", senderIdentityUuid: "i", senderTenantUuid: "t" };

/** 10 domains x (10 commands, 10 queries, 10 events), each with a handler; schemas in a file as `mneme schema build` writes it. */
function buildApp(dir: string): Facade {
  const defs: Record<string, JsonSchema> = {
    Uuid: { type: "string", format: "uuid" },
  };
  for (let d = 0; d < DOMAINS; d++) {
    for (let i = 0; i < PER_DOMAIN; i++) {
      defs[`D${d}Cmd${i}`] = {
        type: "object",
        properties: { id: { $ref: "#/$defs/Uuid" }, title: { type: "string", minLength: 1 }, count: { type: "integer" } },
        required: ["id", "title"],
        additionalProperties: false,
      };
    }
  }
  const file = join(dir, "schemas.json");
  writeFileSync(file, JSON.stringify({ $schema: S2020, $defs: defs }));
  const f = createFacade({ schemas: file, authorizer: () => undefined });
  for (let d = 0; d < DOMAINS; d++) {
    const D = defineDomain(`D${d}`);
    const handlers: ((i: DomainInstaller) => void)[] = [];
    for (let i = 0; i < PER_DOMAIN; i++) {
      const c = D.command<{ id: string }>(`D${d}Cmd${i}`);
      const q = D.query<Record<string, never>, number>(`D${d}Qry${i}`);
      handlers.push((inst) => {
        inst.handleCommand(c, () => []);
        inst.handleQuery(q, () => i);
      });
      D.event(`D${d}Evt${i}`);
    }
    f.registerDomain(D, (inst) => handlers.forEach((h) => h(inst)));
  }
  return f;
}

export default async function (b: Bench): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "mneme-bench-runtime-"));
  const n = b.quick ? 2_000 : 50_000;
  let sink = 0;
  try {
    const f = buildApp(dir);
    await f.start();
    const rt = f.runtime;
    const perCall = async (name: string, fn: () => unknown, calls = n) => {
      fn(); // warm caches
      const t0 = performance.now();
      for (let i = 0; i < calls; i++) if (fn() !== undefined) sink++;
      const micros = ((performance.now() - t0) * 1000) / calls;
      b.value("runtime", name, micros, "µs/call");
    };
    console.log(
      `  (app: ${DOMAINS} domains x ${PER_DOMAIN} commands/queries/events + the Runtime domain; ${rt.listCommands().length} commands, ${rt.listQueries().length} queries)`,
    );
    await perCall("listCommands", () => rt.listCommands());
    await perCall("listQueries", () => rt.listQueries());
    await perCall("listEvents", () => rt.listEvents());
    await perCall("listCommandHandlers", () => rt.listCommandHandlers());
    await perCall("listQueryHandlers", () => rt.listQueryHandlers());
    await perCall("listEventHandlers (0 handlers)", () => rt.listEventHandlers());
    await perCall("permissions.list()", () => rt.permissions.list());
    await perCall("systemInfo", () => rt.systemInfo());
    await perCall("getSchema (first type of a domain, file-loaded $defs)", () => rt.getSchema({ domain: "D5", type: "D5Cmd0" }));
    await perCall("getSchema (last type of a domain, file-loaded $defs)", () => rt.getSchema({ domain: "D9", type: "D9Cmd9" }));

    // Through the facade: the permission check, schema validation and the handler.
    const qn = Math.floor(n / 5);
    const ref = { domain: "Runtime", name: "ListCommands" };
    await f.query(ref, {}, { reqCtx: USER });
    const t0 = performance.now();
    for (let i = 0; i < qn; i++) if ((await f.query(ref, {}, { reqCtx: USER })) !== undefined) sink++;
    b.value("runtime", "facade.query(Runtime.ListCommands) incl. permission", ((performance.now() - t0) * 1000) / qn, "µs/call");
    const sref = { domain: "Runtime", name: "GetSchema" };
    const t1 = performance.now();
    for (let i = 0; i < qn; i++) if ((await f.query(sref, { domain: "D9", type: "D9Cmd9" }, { reqCtx: USER })) !== undefined) sink++;
    b.value("runtime", "facade.query(Runtime.GetSchema) incl. permission", ((performance.now() - t1) * 1000) / qn, "µs/call");
    await f.stop();

    // Fan-out: one publish reaches 1,000 subscribers.
    const subscribers = 1000;
    const events = b.quick ? 1_000 : 20_000;
    const raw = new EventEmitter<{ event: [SystemEvent] }>();
    let rawSeen = 0;
    for (let i = 0; i < subscribers; i++) raw.on("event", (e) => void (rawSeen += e.id > 0 ? 1 : 0));
    // Warm both paths up first: the figures are noisy on a shared 2-core machine, cold JIT makes them worse.
    for (let i = 1; i <= 2000; i++) raw.emit("event", { id: i, kind: "CommandExecuted", at: 0, data: { i } });
    rawSeen = 0;
    const baseline = await b.measure(
      "system events",
      `raw eventemitter3, ${subscribers} listeners (baseline)`,
      events,
      () => {
        for (let i = 1; i <= events; i++) raw.emit("event", { id: i, kind: "CommandExecuted", at: 0, data: { i } });
      },
      "events/s",
    );

    const p = new SystemEventProducer();
    p.start();
    let seen = 0;
    for (let i = 0; i < subscribers; i++) p.subscribe(() => void seen++);
    for (let i = 0; i < 2000; i++) p.publish("CommandExecuted", { i }, "t");
    seen = 0;
    const sync = await b.measure(
      "system events",
      `producer.publish, ${subscribers} sync subscribers`,
      events,
      () => {
        for (let i = 0; i < events; i++) p.publish("CommandExecuted", { i }, "t");
      },
      "events/s",
    );
    b.compare(sync, baseline);
    if (seen !== subscribers * events || rawSeen !== subscribers * events) throw new Error(`lost deliveries: ${seen} / ${rawSeen}`);
    p.stop();

    const pt = new SystemEventProducer();
    pt.start();
    let tenantSeen = 0;
    for (let i = 0; i < subscribers; i++) pt.subscribe(() => void tenantSeen++, { tenantUuid: `t${i % 100}` });
    await b.measure(
      "system events",
      `producer.publish, ${subscribers} subscribers over 100 tenants`,
      events,
      () => {
        for (let i = 0; i < events; i++) pt.publish("CommandExecuted", { i }, `t${i % 100}`);
      },
      "events/s",
    );
    if (tenantSeen !== (subscribers / 100) * events) throw new Error(`tenant filter delivered ${tenantSeen}`);
    pt.stop();

    // Async subscribers (an SSE writer awaiting its socket): each delivery is a promise; queues drain between publishes.
    const pa = new SystemEventProducer({ maxQueuePerSubscriber: 10_000 });
    pa.start();
    let asyncSeen = 0;
    for (let i = 0; i < subscribers; i++) pa.subscribe(async () => void asyncSeen++);
    const asyncEvents = Math.floor(events / 4);
    await b.measure(
      "system events",
      `producer.publish, ${subscribers} async subscribers (drained)`,
      asyncEvents,
      async () => {
        for (let i = 0; i < asyncEvents; i++) {
          pa.publish("CommandExecuted", { i });
          if (i % 100 === 99) await new Promise((r) => setImmediate(r));
        }
        while (asyncSeen < subscribers * asyncEvents) await new Promise((r) => setImmediate(r));
      },
      "events/s",
    );
    pa.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (sink === 0) throw new Error("unreachable: keeps the loops from being optimised away");
}
