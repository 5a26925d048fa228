/**
 * Looks for the JSON.parse defect of Deno 2.9 (V8 15.0) behind the Deno skip in
 * test/runtimes/known-issues.ts: generated JSON values (the EventRepository
 * payload contract's generator) are stringified and parsed back until one comes
 * back different or the time is up. Exits 1 on a mismatch, 0 when none was seen.
 * Not part of the smoke run (it is a search, not a test). After `npm run build`:
 *
 *   deno run -A test/runtimes/json-key-probe.mjs [seconds]   (also: bun, node)
 */
import fc from "fast-check";
import { jsonSafeArbitrary, sameJson } from "../../dist/testing/event-repository-payload-contract.js";

const seconds = Number(process.argv[2] ?? 60);
const deno = globalThis.Deno;
const runtime =
  deno !== undefined ? `deno ${deno.version.deno}` : process.versions.bun ? `bun ${process.versions.bun}` : `node ${process.versions.node}`;
const started = Date.now();
let values = 0;
while (Date.now() - started < seconds * 1000) {
  for (const value of fc.sample(jsonSafeArbitrary(fc), 200)) {
    values++;
    const text = JSON.stringify(value);
    const back = JSON.parse(text);
    if (sameJson(back, value)) continue;
    let again = 0;
    for (let i = 0; i < 100; i++) if (!sameJson(JSON.parse(text), value)) again++;
    console.log(`${runtime}: value ${values} parsed back differently (and ${again} of 100 parses again)`);
    console.log(`  text: ${text}`);
    console.log(`  back: ${JSON.stringify(back)}`);
    process.exit(1);
  }
}
console.log(`${runtime}: ${values} values in ${seconds} s, every one parsed back unchanged`);
