/**
 * Standard Schema v1 (standardschema.dev): the interface zod 4, valibot,
 * arktype and others implement, so a payload can be declared with any of
 * them. The parts of the published specification mneme reads, written as
 * structural types (no package is needed at run time): the types (a token's
 * payload type), `validate`, and Standard JSON Schema's `jsonSchema.input`.
 */

/** A Standard Schema v1 validator of payloads whose input type is `Input` (and output type `Output`). */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": StandardSchemaV1.Props<Input, Output>;
}

// A namespace, as the specification declares these types: `StandardSchemaV1.InferInput<S>`.
// eslint-disable-next-line @typescript-eslint/no-namespace
export declare namespace StandardSchemaV1 {
  interface Props<Input = unknown, Output = Input> {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => Result<Output> | Promise<Result<Output>>;
    readonly types?: Types<Input, Output> | undefined;
    /** Standard JSON Schema: present where the library can describe its input as JSON Schema. */
    readonly jsonSchema?: JsonSchemaConverter | undefined;
  }
  type Result<Output> = SuccessResult<Output> | FailureResult;
  interface SuccessResult<Output> {
    readonly value: Output;
    readonly issues?: undefined;
  }
  interface FailureResult {
    readonly issues: readonly Issue[];
  }
  interface Issue {
    readonly message: string;
    readonly path?: readonly (PropertyKey | PathSegment)[] | undefined;
  }
  interface PathSegment {
    readonly key: PropertyKey;
  }
  interface Types<Input = unknown, Output = Input> {
    readonly input: Input;
    readonly output: Output;
  }
  interface JsonSchemaConverter {
    readonly input: (options: { readonly target: string }) => Record<string, unknown>;
  }
  type InferInput<S extends StandardSchemaV1> = NonNullable<S["~standard"]["types"]>["input"];
  type InferOutput<S extends StandardSchemaV1> = NonNullable<S["~standard"]["types"]>["output"];
}

/** True for a Standard Schema v1 validator (an object or function with `~standard.version === 1` and `validate`). */
export function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  if ((typeof value !== "object" && typeof value !== "function") || value === null) return false;
  const props = (value as { "~standard"?: unknown })["~standard"];
  return (
    typeof props === "object" &&
    props !== null &&
    (props as { version?: unknown }).version === 1 &&
    typeof (props as { validate?: unknown }).validate === "function"
  );
}
