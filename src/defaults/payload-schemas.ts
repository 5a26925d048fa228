/**
 * JSON Schemas (2020-12) of the built-in commands and queries: they ship with
 * the domains, so validation and `runtime.getSchema` work without `mneme schema build`.
 */
import { MnemeError } from "../model/errors.js";
import type { JsonSchema } from "../model/types.js";
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from "./password.js";

const S2020 = "https://json-schema.org/draft/2020-12/schema";

/** A closed object schema. */
export function objectSchema(properties: Record<string, unknown>, required: string[] = []): JsonSchema {
  return { $schema: S2020, type: "object", properties, required, additionalProperties: false };
}

/** A uuid string. */
export const uuidSchema = { type: "string", format: "uuid" };
/** An email address (checked by the `email` format). */
export const emailSchema = { type: "string", format: "email", maxLength: 254 };
/** A new password: 8 to 1024 characters. */
export const passwordSchema = { type: "string", minLength: PASSWORD_MIN_LENGTH, maxLength: PASSWORD_MAX_LENGTH };
/** Login takes any string: a too-short password is just a wrong one. */
export const loginPasswordSchema = { type: "string", maxLength: PASSWORD_MAX_LENGTH };
/** A non-empty display name of at most 200 characters. */
export const nameSchema = { type: "string", minLength: 1, maxLength: 200 };
/** An account's display name (may be empty). */
export const accountNameSchema = { type: "string", maxLength: 200 };
/** `*`, `Domain.*` or `Domain.Type` (store permissions: `Runtime.StoreEvent.Read`). */
export const permissionNameSchema = {
  type: "string",
  minLength: 1,
  maxLength: 300,
  pattern: "^(\\*|[A-Za-z][A-Za-z0-9_]*\\.(\\*|[A-Za-z][A-Za-z0-9_.]*))$",
};
/** The `includeHistory` flag of Get and List queries. */
export const includeHistorySchema = { type: "boolean" };
/** `page`, `pageSize` and `includeHistory` of list queries. */
export const pageProperties = {
  page: { type: "integer", minimum: 1 },
  pageSize: { type: "integer", minimum: 1, maximum: 1000 },
  includeHistory: includeHistorySchema,
};

/** A name trimmed; VALIDATION_FAILED when nothing is left. */
export function cleanName(name: string, pointer = "/name"): string {
  const n = name.trim();
  if (n === "")
    throw new MnemeError("VALIDATION_FAILED", "name must not be blank", { details: [{ pointer, message: "must not be blank" }] });
  return n;
}
