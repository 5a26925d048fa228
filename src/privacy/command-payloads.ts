/**
 * The personal data of commands: how a command's payload is kept wherever
 * mneme stores it (its CommandStore record, an outbox entry, a scheduled
 * command, a dead letter): the fields its type declares sealed under the
 * subject's key, as events' are, so `forget` erases them there too.
 */
import { isMnemeError, MnemeError } from "../model/errors.js";
import { REDACTED, redact } from "../model/redact.js";
import type { CommandPersonalData, PersonalData } from "../model/tokens.js";
import type { Event, RequestContext } from "../model/types.js";
import { jsonSafeProblem } from "../store/json-safe.js";
import { validateKeyStoreId } from "../store/key-store.js";
import { envelopeKeyId, ERASED, type FieldEnvelope } from "./field-envelope.js";
import type { PersonalDataProtection } from "./personal-data-protection.js";
import { mapValues, pointerTokens, replaceAt, valueAt } from "./personal-fields.js";

/** What of a command type its stored payload depends on. */
export interface StoredCommandType {
  readonly domain: string;
  readonly name: string;
  readonly secretFields: readonly string[];
  readonly personalData?: CommandPersonalData;
}

/**
 * The data subject of a command's payload. VALIDATION_FAILED when the subject
 * function throws or returns something other than a non-empty string (the
 * payload then lacks what names its subject).
 */
export function commandSubjectOf(type: StoredCommandType, spec: CommandPersonalData, payload: unknown, reqCtx: RequestContext): string {
  let subject: unknown;
  try {
    subject = spec.subject(payload, reqCtx);
  } catch (cause) {
    throw new MnemeError("VALIDATION_FAILED", `${type.domain}.${type.name}: personalData.subject threw: ${String(cause)}`, {
      cause,
      details: [{ pointer: "", message: "personalData.subject threw" }],
    });
  }
  try {
    validateKeyStoreId("subject", subject);
  } catch {
    throw new MnemeError(
      "VALIDATION_FAILED",
      `${type.domain}.${type.name}: personalData.subject must return a non-empty string (at most 512 characters, no U+0000), got ${typeof subject}`,
      { details: [{ pointer: "", message: "personalData.subject returned no subject" }] },
    );
  }
  return subject as string;
}

/**
 * `payload` with the values at `fields` (JSON pointers) sealed under the
 * subject's key (a copy; envelopes and absent fields stay as they are).
 */
export async function sealFields(
  protection: PersonalDataProtection,
  payload: unknown,
  fields: readonly string[],
  subject: string,
  label: string,
): Promise<unknown> {
  let out = payload;
  let key: Awaited<ReturnType<PersonalDataProtection["liveKey"]>> | undefined;
  for (const field of fields) {
    const tokens = pointerTokens(field);
    const value = valueAt(out, tokens);
    if (value === undefined || envelopeKeyId(value) !== undefined) continue;
    const problem = jsonSafeProblem(value);
    if (problem !== undefined) {
      throw new MnemeError("VALIDATION_FAILED", `${label}${field}${problem.pointer}: ${problem.message}`, {
        details: [{ pointer: `${field}${problem.pointer}`, message: problem.message }],
      });
    }
    key ??= await protection.liveKey(subject);
    out = replaceAt(out, tokens, protection.seal(value, key));
  }
  return out;
}

/**
 * The payload a command's record keeps: secret fields "[redacted]", declared
 * personal fields sealed under the subject's key. `kept`, when the payload
 * is kept sealed elsewhere already (an outbox entry), is what is recorded, its
 * envelopes as they are; the subject is named from the clear `payload`.
 */
export async function recordedCommandPayload(
  protection: PersonalDataProtection,
  type: StoredCommandType,
  payload: unknown,
  reqCtx: RequestContext,
  kept: unknown = payload,
): Promise<unknown> {
  const redacted = redact(kept, type.secretFields);
  const spec = type.personalData;
  if (spec === undefined) return redacted;
  const subject = commandSubjectOf(type, spec, payload, reqCtx);
  return sealFields(protection, redacted, spec.fields, subject, `${type.domain}.${type.name}: payload`);
}

/**
 * The payload a record keeps when its personal fields could not be sealed
 * (the command was refused before, or its subject is missing): they are
 * "[redacted]", never kept in clear.
 */
export function withoutPersonalFields(type: StoredCommandType, payload: unknown): unknown {
  let out = redact(payload, type.secretFields);
  for (const field of type.personalData?.fields ?? []) {
    const tokens = pointerTokens(field);
    if (valueAt(out, tokens) !== undefined) out = replaceAt(out, tokens, REDACTED);
  }
  return out;
}

/**
 * `given` (secret fields redacted) as a record of it reads once its sealed
 * values were erased: "[erased]" wherever `recorded` (an opened record) reads
 * "[erased]", so that a retry of a command whose subject was forgotten still
 * counts as the same request.
 */
export function asErasedIn(type: StoredCommandType, recorded: unknown, given: unknown): unknown {
  return erasedLike(recorded, redact(given, type.secretFields));
}

function erasedLike(recorded: unknown, given: unknown): unknown {
  if (recorded === ERASED) return given === undefined ? given : ERASED;
  if (typeof recorded !== "object" || recorded === null || typeof given !== "object" || given === null) return given;
  if (Array.isArray(recorded) !== Array.isArray(given)) return given;
  if (Array.isArray(given)) return given.map((v, i) => erasedLike((recorded as unknown[])[i], v));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(given))
    out[k] = Object.hasOwn(recorded, k) ? erasedLike((recorded as Record<string, unknown>)[k], v) : v;
  return out;
}

/**
 * A command payload derived from an event (by a process manager) with every
 * value that equals a personal value of that event sealed under the event's
 * subject: values copied from a protected field stay protected in the outbox
 * even when the command type does not declare them. Values of the event that
 * read "[erased]" are not matched.
 */
export async function sealEventValues(
  protection: PersonalDataProtection,
  payload: unknown,
  event: Event,
  spec: PersonalData | undefined,
): Promise<unknown> {
  if (spec === undefined) return payload;
  const personal = new Set<string>();
  for (const field of spec.fields) {
    const v = valueAt(event.payload, pointerTokens(field));
    if (v !== undefined && v !== ERASED && v !== null && v !== "") personal.add(JSON.stringify(v));
  }
  if (personal.size === 0) return payload;
  let subject: unknown;
  try {
    subject = spec.subject(event.payload, event);
    validateKeyStoreId("subject", subject);
  } catch {
    // A stored event whose subject is no longer computable (an older shape): the command type's own declaration is what protects it.
    return payload;
  }
  const key = await protection.liveKey(subject as string);
  return mapValues(payload, (v) => {
    if (envelopeKeyId(v) !== undefined) return v;
    return personal.has(JSON.stringify(v)) ? protection.seal(v, key) : undefined;
  });
}

/**
 * What process managers and reactors use to keep command payloads in their
 * outbox: sealed on the way in, opened on the way out (see docs/privacy.md).
 */
export interface CommandPayloadProtection {
  /**
   * The payload of a command `cause` makes, as an outbox keeps it: the fields
   * the command type declares, and every value equal to a personal value of
   * `cause`, sealed. VALIDATION_FAILED when the command's subject cannot be named.
   */
  protect(
    command: { readonly domain: string; readonly name: string },
    payload: unknown,
    reqCtx: RequestContext,
    cause: Event,
  ): Promise<unknown>;
  /**
   * What a broker consumer's dead letter keeps of a message mapped to
   * `command`: when the command type declares personal data, the fields it
   * declares and the whole message `body` sealed under the command's subject
   * (the body holds the same data, and more, in its own shape). Else both as
   * they are. When the subject cannot be named (or a field is not
   * JSON-safe), the payload's personal fields are "[redacted]" and the body is
   * kept as it is (it is what a retry maps again).
   */
  protectMessage(
    command: { readonly domain: string; readonly name: string },
    payload: unknown,
    reqCtx: RequestContext,
    body: string,
  ): Promise<{ readonly payload: unknown; readonly body: string | FieldEnvelope }>;
  /** A stored payload opened, with how many values read "[erased]". */
  open(payload: unknown): Promise<{ readonly payload: unknown; readonly erased: number }>;
}

/** The {@link CommandPayloadProtection} of a facade: its key store, command types and event types. */
export class CommandPayloads implements CommandPayloadProtection {
  constructor(
    private readonly protection: PersonalDataProtection,
    private readonly commandType: (domain: string, name: string) => StoredCommandType | undefined,
    private readonly eventPersonalData: (domain: string, name: string) => PersonalData | undefined,
  ) {}

  async protect(
    command: { readonly domain: string; readonly name: string },
    payload: unknown,
    reqCtx: RequestContext,
    cause: Event,
  ): Promise<unknown> {
    const type = this.commandType(command.domain, command.name);
    let out = payload;
    const spec = type?.personalData;
    if (type !== undefined && spec !== undefined) {
      const subject = commandSubjectOf(type, spec, payload, reqCtx);
      out = await sealFields(this.protection, out, spec.fields, subject, `${type.domain}.${type.name}: payload`);
    }
    return sealEventValues(this.protection, out, cause, this.eventPersonalData(cause.domain, cause.name));
  }

  async protectMessage(
    command: { readonly domain: string; readonly name: string },
    payload: unknown,
    reqCtx: RequestContext,
    body: string,
  ): Promise<{ readonly payload: unknown; readonly body: string | FieldEnvelope }> {
    const type = this.commandType(command.domain, command.name);
    const spec = type?.personalData;
    if (type === undefined || spec === undefined) return { payload, body };
    let subject: string;
    let sealed: unknown;
    try {
      subject = commandSubjectOf(type, spec, payload, reqCtx);
      sealed = await sealFields(this.protection, payload, spec.fields, subject, `${type.domain}.${type.name}: payload`);
    } catch (err) {
      // A dead letter is written whatever the payload is: what cannot be sealed is not kept.
      if (isMnemeError(err, "VALIDATION_FAILED")) return { payload: withoutPersonalFields(type, payload), body };
      throw err;
    }
    return { payload: sealed, body: this.protection.seal(body, await this.protection.liveKey(subject)) };
  }

  async open(payload: unknown): Promise<{ readonly payload: unknown; readonly erased: number }> {
    return this.protection.openPayload(payload);
  }
}
