/**
 * The JSON-safe payload check (`jsonSafeProblem`) on the payloads of a command
 * and of an event batch, against `JSON.stringify` of the same payloads as the
 * baseline (what every backend does to a payload anyway). The row "mneme: ..."
 * is `jsonSafeProblem`; its ratio is its throughput over `JSON.stringify`'s.
 */
import { jsonSafeProblem } from "../src/store/json-safe.js";
import type { Bench } from "./harness.js";
import { duel, todoBatchOf100 } from "./harness.js";

/** A command payload of a realistic size: a few strings, numbers, a nested object and an array. */
const command = {
  todoUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ab",
  title: "Write the bench",
  assigneeEmail: "ann@example.com",
  dueAt: "2025-06-01T12:00:00Z",
  priority: "high",
  estimateHours: 2.5,
  done: false,
  tags: ["work", "bench", "json"],
  meta: { source: "web", attempts: 1, note: null },
};

/** A larger document: 50 line items (objects in an array), with non-ASCII text. */
const order = {
  orderUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ac",
  customer: { name: "Zoë Ünal", address: { street: "Hauptstraße 1", city: "Köln", zip: "50667" } },
  items: Array.from({ length: 50 }, (_, i) => ({
    sku: `SKU-${i}`,
    name: `item ${i} — ✓`,
    qty: (i % 3) + 1,
    price: 9.99 + i,
    tags: ["a", "b"],
  })),
};

export default async function (b: Bench): Promise<void> {
  const n = b.quick ? 20_000 : 1_000_000;
  const payloads = todoBatchOf100(0).map((e) => e.payload);
  const cases: { name: string; value: unknown; ops: number }[] = [
    { name: "command payload (9 fields)", value: command, ops: n },
    { name: "order (50 line items)", value: order, ops: Math.floor(n / 20) },
    { name: "event batch of 100 payloads", value: payloads, ops: Math.floor(n / 20) },
  ];
  let sink = 0;
  const rounds = 10;
  for (const c of cases) {
    if (jsonSafeProblem(c.value) !== undefined) throw new Error(`the ${c.name} bench payload is not JSON-safe`);
    const perRound = Math.max(1, Math.floor(c.ops / rounds));
    // Interleaved rounds, so background load hits both alike; the first round of each warms up the JIT.
    await duel(
      b,
      "json-safe",
      c.name,
      perRound,
      rounds,
      async () => {
        for (let i = 0; i < perRound; i++) if (jsonSafeProblem(c.value) === undefined) sink++;
      },
      [
        {
          name: "JSON.stringify (baseline)",
          run: () => {
            for (let i = 0; i < perRound; i++) sink += JSON.stringify(c.value).length;
          },
        },
      ],
      "calls/s",
    );
  }
  if (sink === 0) throw new Error("unreachable: keeps the loops from being optimised away");
}
