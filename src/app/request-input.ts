/**
 * The checks every request passes before anything runs: the JSON-safe payload
 * rule, the request context, the caller's message uuid.
 */
import { newUuid } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import { isPlainObject } from "../model/redact.js";
import type { RequestContext } from "../model/types.js";
import { EVENT_ID_MAX_LENGTH } from "../store/append-validation.js";
import { jsonSafeProblem, stringProblem, trySealJsonSafe } from "../store/json-safe.js";

/**
 * The JSON-safe payload rule (before the permission check, so nothing runs on
 * a payload no backend could store faithfully): VALIDATION_FAILED with a pointer.
 */
export function checkPayload(type: { domain: string; name: string }, payload: unknown): void {
  const problem = jsonSafeProblem(payload);
  if (problem !== undefined) {
    throw new MnemeError(
      "VALIDATION_FAILED",
      `the payload of ${type.domain}.${type.name} is not JSON-safe at ${problem.pointer}: ${problem.message}`,
      {
        details: [{ pointer: problem.pointer, message: problem.message }],
      },
    );
  }
}

/** A payload that is not a JSON object: VALIDATION_FAILED. */
export function notAnObject(type: { domain: string; name: string }): MnemeError {
  return new MnemeError("VALIDATION_FAILED", `the payload of ${type.domain}.${type.name} must be a JSON object`, {
    details: [{ pointer: "", message: "must be object" }],
  });
}

export function normaliseReqCtx(reqCtx: RequestContext | undefined): RequestContext {
  if (reqCtx === undefined) return {};
  if (!isPlainObject(reqCtx)) throw new MnemeError("INVALID_REQUEST", "reqCtx must be an object");
  // Every event of the command stores a copy of it: it must read back unchanged too.
  const problem = jsonSafeProblem(reqCtx);
  if (problem !== undefined)
    throw new MnemeError("INVALID_REQUEST", `reqCtx is not JSON-safe at ${problem.pointer}: ${problem.message}`, {
      details: [{ pointer: problem.pointer, message: problem.message }],
    });
  const v: unknown = reqCtx.targetAggregateVersion;
  if (v !== undefined && (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0)) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `reqCtx.targetAggregateVersion must be an integer >= 0, got ${typeof v === "number" ? String(v) : JSON.stringify(v)}`,
    );
  }
  return reqCtx;
}

/**
 * The deeply frozen copy the events and the record keep of a request context
 * that normaliseReqCtx accepts, checked and copied in one walk; undefined for
 * any other (normaliseReqCtx then tells what is wrong) and for none given.
 */
export function sealedReqCtx(reqCtx: RequestContext | undefined): RequestContext | undefined {
  if (!isPlainObject(reqCtx)) return undefined;
  const v: unknown = reqCtx.targetAggregateVersion;
  if (v !== undefined && (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0)) return undefined;
  return trySealJsonSafe(reqCtx);
}

/** The caller's command/query uuid, or a fresh uuid v7. */
export function messageUuid(given: string | undefined, what: string): string {
  if (given === undefined) return newUuid();
  if (typeof given !== "string" || given === "") throw new MnemeError("INVALID_REQUEST", `${what} must be a non-empty string`);
  // Stored as text by every backend: "\ud800" and "\udc00" would be one command on Postgres (one idempotency record).
  const problem = given.length > EVENT_ID_MAX_LENGTH ? `is longer than ${EVENT_ID_MAX_LENGTH} characters` : stringProblem(given);
  if (problem !== undefined) throw new MnemeError("INVALID_REQUEST", `${what} ${problem}`);
  return given;
}

/** A number of ms a timer can wait (0..2^31-1): INVALID_REQUEST naming `what` otherwise. */
export function checkTimerMs(value: unknown, what: string): number {
  if (typeof value !== "number" || !(value >= 0) || value > 2_147_483_647)
    throw new MnemeError("INVALID_REQUEST", `${what} must be a number of ms in 0..2147483647, got ${String(value)}`);
  return value;
}
