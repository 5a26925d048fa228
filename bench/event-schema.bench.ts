/**
 * The cost of an event type's schema on the in-memory command path: a
 * command that returns one event, its payload validated by the event's zod 4
 * schema (and, in a second duel, by a JSON Schema through ajv), against the
 * same command whose event type has no schema, in 60 interleaved rounds of one
 * sitting (each on a facade of its own over the memory stores). Aim: at most
 * 10 % slower (ratio >= 0.90).
 */
import { createFacade, type Facade } from "../src/app/facade.js";
import { newUuid } from "../src/model/clock.js";
import { defineDomain } from "../src/model/domain.js";
import { anonymous } from "../src/model/permission.js";
import type { EventType } from "../src/model/tokens.js";
import type { JsonSchema } from "../src/model/types.js";
import type { StandardSchemaV1 } from "../src/model/standard-schema.js";
import { z } from "zod";
import { BENCH_REQ_CTX as reqCtx, type Bench, duel } from "./harness.js";

const JSON_SCHEMA: JsonSchema = { type: "object", properties: { n: { type: "integer", minimum: 1 } }, required: ["n"] };

async function counter(
  schema: JsonSchema | StandardSchemaV1 | undefined,
): Promise<{ facade: Facade; Counted: EventType; count: (n: number) => Promise<unknown> }> {
  const D = defineDomain("Counter");
  const Count = D.command<{ counterUuid: string; n: number }>("Count", { permission: anonymous });
  const Counted = D.event<{ n: number }>("Counted", schema === undefined ? {} : { schema });
  D.handleCommand(Count, (_ctx, _c, p) => [Counted.create(p.counterUuid, { n: p.n })]);
  const facade = createFacade({ appName: "event-schema-bench" });
  facade.registerDomain(D);
  await facade.start();
  return { facade, Counted, count: (n) => facade.dispatch(Count, { counterUuid: newUuid(), n }, { reqCtx }) };
}

export default async function eventSchemaBench(b: Bench): Promise<void> {
  const perRound = b.quick ? 500 : 2_000;
  const rounds = b.quick ? 4 : 60;
  // A baseline facade per duel: every facade then holds as many events as the one it is compared with.
  const plain = await counter(undefined);
  const plainToo = await counter(undefined);
  const zod = await counter(z.object({ n: z.number().int().min(1) }));
  const json = await counter(JSON_SCHEMA);
  const round = (side: { count: (n: number) => Promise<unknown> }) => async () => {
    for (let i = 1; i <= perRound; i++) await side.count(i);
  };
  try {
    // Warm-up: every path compiled and hot before the first timed round.
    for (const side of [plain, plainToo, zod, json]) await round(side)();
    const baseline = (side: typeof plain) => [{ name: "no event schema (baseline)", run: round(side) }];
    await duel(b, "event-schema", "command + 1 event, zod event schema", perRound, rounds, round(zod), baseline(plain), "commands/s");
    await duel(b, "event-schema", "command + 1 event, JSON Schema (ajv)", perRound, rounds, round(json), baseline(plainToo), "commands/s");
    // The check alone, per event: what the ratios above pay per command, free of the command path's noise.
    const n = perRound * 20;
    for (const [what, side] of [
      ["zod", zod],
      ["JSON Schema (ajv)", json],
    ] as const) {
      let sink = 0;
      const t0 = performance.now();
      for (let i = 1; i <= n; i++) if (side.facade.schemas.eventProblems(side.Counted, { n: i }) === undefined) sink++;
      b.value("event-schema", `${what}: the check alone, per event`, ((performance.now() - t0) * 1e6) / n, "ns");
      if (sink !== n) throw new Error("unreachable: every payload is valid");
    }
  } finally {
    for (const side of [plain, plainToo, zod, json]) await side.facade.stop();
  }
}
