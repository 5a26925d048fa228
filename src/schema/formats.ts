/**
 * The string formats mneme checks when validating payloads: small, fast checks
 * for the formats commands actually use, so ajv-formats is not a dependency.
 * Any other format name is accepted without a check (annotation only, which is
 * what 2020-12's format-annotation vocabulary prescribes by default).
 */

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME = /^(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[zZ]|[+-](\d{2}):(\d{2}))?$/;
const DATE_TIME_SPLIT = /^(\d{4}-\d{2}-\d{2})[tT ](.+)$/;
const DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
// The pragmatic RFC 5321 subset that browsers use for <input type=email>.
const EMAIL =
  /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;
const UUID = /^(?:urn:uuid:)?[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}$/i;
const URI_SCHEME = /^[a-z][a-z0-9+.-]*:[^\s]*$/i;

function isLeap(y: number): boolean {
  return y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
}

/** RFC 3339 full-date with a real calendar day (2023-02-29 fails). */
export function isDate(s: string): boolean {
  const m = DATE.exec(s);
  if (m === null) return false;
  const y = Number(m[1]);
  const mo = Number(m[2]);
  const d = Number(m[3]);
  return mo >= 1 && mo <= 12 && d >= 1 && d <= (mo === 2 && !isLeap(y) ? 28 : DAYS[mo - 1]!);
}

/** RFC 3339 time: hh:mm:ss[.frac] with an optional offset (leap second 60 allowed). */
export function isTime(s: string, requireOffset = false): boolean {
  const m = TIME.exec(s);
  if (m === null) return false;
  if (requireOffset && !/[zZ]$|[+-]\d{2}:\d{2}$/.test(s)) return false;
  const h = Number(m[1]);
  const mi = Number(m[2]);
  const sec = Number(m[3]);
  const oh = m[4] === undefined ? 0 : Number(m[4]);
  const om = m[5] === undefined ? 0 : Number(m[5]);
  return h <= 23 && mi <= 59 && sec <= 60 && oh <= 23 && om <= 59;
}

/** RFC 3339 date-time: a date, "T" (or a space), a time with a required offset. */
export function isDateTime(s: string): boolean {
  const m = DATE_TIME_SPLIT.exec(s);
  return m !== null && isDate(m[1]!) && isTime(m[2]!, true);
}

/** An absolute URI: a scheme, no whitespace, parseable by the WHATWG URL parser. */
export function isUri(s: string): boolean {
  return URI_SCHEME.test(s) && URL.canParse(s);
}

/** The checks by format name, in the shape ajv's `formats` option takes. */
export const FORMAT_CHECKS: Readonly<Record<string, (s: string) => boolean>> = Object.freeze({
  "date-time": isDateTime,
  date: isDate,
  time: (s: string) => isTime(s),
  email: (s: string) => s.length <= 254 && EMAIL.test(s),
  uuid: (s: string) => UUID.test(s),
  uri: isUri,
});
