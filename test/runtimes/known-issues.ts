/**
 * What a runtime gets wrong that mneme cannot work around, as conformance
 * skips with their reason (docs/runtimes.md, "What does not work").
 */
import type { ContractSkip } from "mneme/testing";

/**
 * True when this runtime's JSON.parse has V8's key-cache defect
 * (https://issues.chromium.org/issues/521080746, nodejs/node#63785): once a
 * text with the key `"\\"` (one backslash) was parsed, the key `"\""` (one
 * double quote) of a like-shaped object reads back as a backslash. Deno 2.9.6
 * (V8 15.0) has it; the Node.js 22, 24 and 26 and the Bun CI runs do not.
 */
export function jsonParseMisreadsQuoteKey(): boolean {
  JSON.parse('{"h":[],"\\\\":0}');
  return Object.keys(JSON.parse('{"h":1,"\\"":2}'))[1] !== '"';
}

/**
 * The EventRepository suite's payload round trip generates such keys, and the
 * Postgres (pg reads jsonb with JSON.parse) and SQLite stores parse payloads
 * back: on a runtime with the defect it fails now and then (one run in three
 * on Deno 2.9.6), so it is skipped there, and runs again once the runtime is fixed.
 */
export const JSON_PARSE_KEY_SKIP: readonly ContractSkip[] = jsonParseMisreadsQuoteKey()
  ? [
      {
        reason: `this runtime's JSON.parse reads the key "\\"" as "\\\\" after a "\\\\" key (V8 key cache, issues.chromium.org/issues/521080746)`,
        tests: ["every accepted payload reads back unchanged"],
      },
    ]
  : [];
