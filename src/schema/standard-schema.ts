/**
 * Payload validation and JSON Schema from a Standard Schema v1 validator
 * (src/model/standard-schema.ts): `validate` gives VALIDATION_FAILED details
 * with JSON pointers; Standard JSON Schema, where the library offers it, the
 * JSON Schema 2020-12 of the input, which the Runtime serves.
 */
import { errorMessage, MnemeError, type MnemeErrorDetail } from "../model/errors.js";
import type { JsonSchema } from "../model/types.js";
import type { StandardSchemaV1 } from "../model/standard-schema.js";
import { appendPointer } from "./json-pointer.js";

/** Checks a payload: `undefined` when valid, else one detail per issue; a Promise when the validator is asynchronous. */
export type StandardPayloadCheck = (payload: unknown) => MnemeErrorDetail[] | undefined | Promise<MnemeErrorDetail[] | undefined>;

/**
 * The check of a Standard Schema: the validator's issues as details with a
 * JSON pointer (RFC 6901) built from each issue's path. The payload is
 * validated, not transformed: the handler gets it as it was sent.
 */
export function standardPayloadCheck(schema: StandardSchemaV1, label: string): StandardPayloadCheck {
  const props = schema["~standard"];
  const detailsOf = (result: StandardSchemaV1.Result<unknown>): MnemeErrorDetail[] | undefined =>
    result.issues === undefined ? undefined : issuesToDetails(result.issues, props.vendor);
  return (payload) => {
    if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
      const got = payload === null ? "null" : Array.isArray(payload) ? "an array" : typeof payload;
      return [{ pointer: "", message: `must be an object (got ${got})`, keyword: "type" }];
    }
    let result: StandardSchemaV1.Result<unknown> | Promise<StandardSchemaV1.Result<unknown>>;
    try {
      result = props.validate(payload);
    } catch (e) {
      throw new MnemeError("INVALID_REQUEST", `the ${props.vendor} schema of ${label} threw while validating: ${errorMessage(e)}`, {
        cause: e,
      });
    }
    return result instanceof Promise ? result.then(detailsOf) : detailsOf(result);
  };
}

function issuesToDetails(issues: readonly StandardSchemaV1.Issue[], vendor: string): MnemeErrorDetail[] {
  if (issues.length === 0) return [{ pointer: "", message: `refused by the ${vendor} schema`, keyword: vendor }];
  return issues.map((issue) => {
    let pointer = "";
    for (const segment of issue.path ?? []) {
      const key = typeof segment === "object" && segment !== null ? segment.key : segment;
      pointer = appendPointer(pointer, typeof key === "symbol" ? (key.description ?? "") : String(key));
    }
    return { pointer, message: issue.message, keyword: vendor };
  });
}

/**
 * The JSON Schema 2020-12 of a Standard Schema's input, from Standard JSON
 * Schema (`~standard.jsonSchema.input({ target: "draft-2020-12" })`), or
 * `undefined` when the library offers none.
 * @throws MnemeError INVALID_REQUEST when the library offers it but fails or answers with something that is not an object.
 */
export function standardJsonSchema(schema: StandardSchemaV1, label: string): JsonSchema | undefined {
  const props = schema["~standard"];
  const converter = props.jsonSchema;
  if (converter === undefined || typeof converter.input !== "function") return undefined;
  let document: unknown;
  try {
    document = converter.input({ target: "draft-2020-12" });
  } catch (e) {
    throw new MnemeError(
      "INVALID_REQUEST",
      `the ${props.vendor} schema of ${label} cannot be described as JSON Schema 2020-12: ${errorMessage(e)}`,
      { cause: e },
    );
  }
  if (typeof document !== "object" || document === null || Array.isArray(document))
    throw new MnemeError("INVALID_REQUEST", `the ${props.vendor} schema of ${label} gave a JSON Schema that is not an object`);
  return document as JsonSchema;
}
