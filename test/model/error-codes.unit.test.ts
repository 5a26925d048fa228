/**
 * User-defined error codes: defineErrorCode's registry (validation, duplicates,
 * mneme's own codes cannot be redefined), the typed code with MnemeError and
 * isMnemeError, and the status mneme/http maps it to.
 */
import { describe, expect, it } from "vitest";
import { defineErrorCode, type ErrorCode, isMnemeError, MnemeError, type MnemeErrorCode, type UserErrorCode } from "mneme";
import { errorCodeDefinition, isMnemeErrorCode, listErrorCodes, MNEME_ERROR_CODES } from "mneme/runtime";
import { STATUS_BY_CODE, statusOf } from "mneme/http";

function codeOf(fn: () => unknown): ErrorCode | "no error" {
  try {
    fn();
  } catch (e) {
    if (!isMnemeError(e)) throw e;
    return e.code;
  }
  return "no error";
}

describe("defineErrorCode", () => {
  it("registers a code with its status and description and returns it, typed", () => {
    const NOT_ENOUGH_STOCK = defineErrorCode("NOT_ENOUGH_STOCK", { status: 422, description: "The stock does not cover the order" });
    const typed: UserErrorCode<"NOT_ENOUGH_STOCK"> = NOT_ENOUGH_STOCK;
    expect(typed).toBe("NOT_ENOUGH_STOCK");
    expect(errorCodeDefinition("NOT_ENOUGH_STOCK")).toEqual({
      code: "NOT_ENOUGH_STOCK",
      status: 422,
      description: "The stock does not cover the order",
    });
    expect(listErrorCodes().map((d) => d.code)).toContain("NOT_ENOUGH_STOCK");
    expect(Object.isFrozen(errorCodeDefinition("NOT_ENOUGH_STOCK"))).toBe(true);
    // The description defaults to the code.
    expect(errorCodeDefinition(defineErrorCode("ORDER_CLOSED", { status: 409 }))?.description).toBe("ORDER_CLOSED");
  });

  it("is idempotent for the same definition (a module evaluated twice)", () => {
    const a = defineErrorCode("QUOTA_EXCEEDED", { status: 429, description: "quota" });
    const b = defineErrorCode("QUOTA_EXCEEDED", { status: 429, description: "quota" });
    expect(a).toBe(b);
    expect(listErrorCodes().filter((d) => d.code === "QUOTA_EXCEEDED")).toHaveLength(1);
  });

  it("refuses a code defined already with another status or description (INVALID_DOMAIN) and keeps the first", () => {
    defineErrorCode("ACCOUNT_FROZEN", { status: 423, description: "frozen" });
    expect(codeOf(() => defineErrorCode("ACCOUNT_FROZEN", { status: 403, description: "frozen" }))).toBe("INVALID_DOMAIN");
    expect(codeOf(() => defineErrorCode("ACCOUNT_FROZEN", { status: 423, description: "something else" }))).toBe("INVALID_DOMAIN");
    expect(errorCodeDefinition("ACCOUNT_FROZEN")?.status).toBe(423);
  });

  it("mneme's own codes cannot be redefined, with any status", () => {
    for (const code of MNEME_ERROR_CODES) {
      expect(
        codeOf(() => defineErrorCode(code, { status: 422 })),
        code,
      ).toBe("INVALID_DOMAIN");
      expect(errorCodeDefinition(code)).toBeUndefined();
    }
    expect(MNEME_ERROR_CODES).toHaveLength(Object.keys(STATUS_BY_CODE).length);
    expect(isMnemeErrorCode("CONFLICT")).toBe(true);
    expect(isMnemeErrorCode("ACCOUNT_FROZEN")).toBe(false);
  });

  it.each<[string, string, { status: number; description?: string }]>([
    ["lower case", "insufficient_funds", { status: 422 }],
    ["a leading digit", "1_FUNDS", { status: 422 }],
    ["an empty code", "", { status: 422 }],
    ["a dash", "NO-FUNDS", { status: 422 }],
    ["a 2xx status", "GOOD_NEWS", { status: 200 }],
    ["a 3xx status", "MOVED_AWAY", { status: 302 }],
    ["a status above 599", "WAY_OFF", { status: 600 }],
    ["a fractional status", "HALF_WAY", { status: 422.5 }],
    ["a status that is a string", "STRINGLY", { status: "422" as unknown as number }],
    ["a description that is not a string", "ODD_TEXT", { status: 422, description: 5 as unknown as string }],
  ])("refuses %s with INVALID_DOMAIN, registering nothing", (_what, code, opts) => {
    expect(codeOf(() => defineErrorCode(code, opts))).toBe("INVALID_DOMAIN");
    expect(errorCodeDefinition(code)).toBeUndefined();
  });
});

describe("a user code on a MnemeError", () => {
  const INSUFFICIENT_FUNDS = defineErrorCode("INSUFFICIENT_FUNDS", { status: 422, description: "The balance does not cover the amount" });

  it("is the error's code, found by isMnemeError, and serialised as its string", () => {
    const e = new MnemeError(INSUFFICIENT_FUNDS, "balance 10 does not cover 25");
    expect(e.code).toBe("INSUFFICIENT_FUNDS");
    expect(isMnemeError(e, INSUFFICIENT_FUNDS)).toBe(true);
    expect(isMnemeError(e, "CONFLICT")).toBe(false);
    expect(isMnemeError(new MnemeError("INVALID_ACTION", "x"), INSUFFICIENT_FUNDS)).toBe(false);
    expect(JSON.parse(JSON.stringify(e))).toEqual({ code: "INSUFFICIENT_FUNDS", message: "balance 10 does not cover 25" });
    if (isMnemeError(e, INSUFFICIENT_FUNDS)) {
      const narrowed: UserErrorCode<"INSUFFICIENT_FUNDS"> = e.code; // narrowed to the user code
      expect(narrowed).toBe(INSUFFICIENT_FUNDS);
    }
  });

  it("is typed: a plain string is not a code, mneme's own codes stay a closed list", () => {
    // @ts-expect-error -- a typo is not a code: user codes come from defineErrorCode only
    expect(() => new MnemeError("INSUFICIENT_FUNDS", "typo")).not.toThrow();
    // @ts-expect-error -- MnemeErrorCode is mneme's own list; a user code is an ErrorCode
    const own: MnemeErrorCode = INSUFFICIENT_FUNDS;
    expect(own).toBe("INSUFFICIENT_FUNDS");
    const any: ErrorCode[] = ["CONFLICT", INSUFFICIENT_FUNDS];
    expect(any).toHaveLength(2);
  });

  it("maps to its status in mneme/http; mneme's own codes keep theirs; unknown codes are 500", () => {
    expect(statusOf(INSUFFICIENT_FUNDS)).toBe(422);
    expect(statusOf("CONFLICT")).toBe(409);
    expect(statusOf("INVALID_ACTION")).toBe(400);
    expect(statusOf("NEVER_DEFINED")).toBe(500);
    expect(statusOf("toString")).toBe(500); // not an inherited property of the table
  });
});
