/** Assertions on calls that should fail: the MnemeError they reject with, or its code. */
import { expect } from "vitest";
import { isMnemeError, type MnemeError, type MnemeErrorCode } from "mneme";

/** The MnemeError `p` (or the call `p`) rejects with; any other error is rethrown, and a success fails the test. */
export async function rejection(p: Promise<unknown> | (() => unknown)): Promise<MnemeError> {
  try {
    await (typeof p === "function" ? p() : p);
  } catch (e) {
    if (isMnemeError(e)) return e;
    throw e;
  }
  throw new Error("expected a rejection");
}

/** The MnemeError of `code` that `make` throws synchronously (a refusal at construction); another error is rethrown, no throw fails the test. */
export function thrownWith(code: MnemeErrorCode, make: () => unknown): MnemeError {
  try {
    make();
  } catch (e) {
    if (isMnemeError(e, code)) return e;
    throw e;
  }
  return expect.fail(`expected a ${code} error`);
}

/** Expects `p` to reject with a MnemeError of `code`; returns the error. */
export async function rejectsWith(p: Promise<unknown>, code: string): Promise<unknown> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, `expected a ${code} rejection`).toBeDefined();
  expect(isMnemeError(e) ? e.code : e).toBe(code);
  return e;
}

/** "ok" when `p` resolves, else the code of its MnemeError (or a description of another error), for tables of outcomes. */
export async function outcomeCode(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => "ok",
    (e: unknown) => (isMnemeError(e) ? e.code : `not a MnemeError: ${String(e)}`),
  );
}
