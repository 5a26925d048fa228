/**
 * Checks a runtime's JSON.parse for V8's key-cache defect behind the skip in
 * test/runtimes/known-issues.ts (https://issues.chromium.org/issues/521080746):
 * first the two-line reproduction (a "\\" key parsed, then a "\"" key read back as
 * "\\"), then generated JSON values (the EventRepository payload contract's
 * generator) stringified and parsed back until one differs or the time is up.
 * Exits 1 on a defect, 0 when none was seen. Not part of the smoke run. After
 * `npm run build`:
 *
 *   deno run -A test/runtimes/json-key-probe.mjs [seconds]   (also: bun, node)
 */
import fc from "fast-check";
import { jsonSafeArbitrary, sameJson } from "../../dist/testing/event-repository-payload-contract.js";

const seconds = Number(process.argv[2] ?? 60);
const deno = globalThis.Deno;
const runtime =
  deno !== undefined ? `deno ${deno.version.deno}` : process.versions.bun ? `bun ${process.versions.bun}` : `node ${process.versions.node}`;
JSON.parse('{"h":[],"\\\\":0}');
const key = Object.keys(JSON.parse('{"h":1,"\\"":2}'))[1];
if (key !== '"') {
  console.log(`${runtime}: after a "\\\\" key, the key "\\"" reads back as ${JSON.stringify(key)}`);
  process.exit(1);
}
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
