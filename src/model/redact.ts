/** The value recorded in place of a secret field. */
export const REDACTED = "[redacted]";

/** A shallow copy of `payload` with the named top-level fields replaced by "[redacted]". */
export function redact(payload: unknown, secretFields: readonly string[]): unknown {
  if (secretFields.length === 0 || typeof payload !== "object" || payload === null || Array.isArray(payload)) return payload;
  const copy: Record<string, unknown> = { ...(payload as Record<string, unknown>) };
  for (const f of secretFields) if (f in copy) copy[f] = REDACTED;
  return copy;
}

/** True for a plain JSON object (not null, not an array). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}
