import { MnemeError, type MnemeErrorCode } from "./errors.js";

/**
 * How long stored data is kept (`retainFor` of an event type or of the
 * LogStore): milliseconds (an integer >= 1), an ISO 8601 duration of days,
 * hours, minutes and seconds (`"P30D"`, `"PT12H"`, `"P1DT6H"`; a week is
 * `"P7D"`: months and years have no fixed length, so they are refused), or
 * a short form: an integer and one unit, `ms`, `s`, `m`, `h`, `d` or `w`
 * (`"30d"`, `"12h"`).
 * @example
 * const Visited = Shop.event<{ page: string }>("PageVisited", { retainFor: "P90D" });
 */
export type RetentionPeriod = number | string;

const SHORT = /^(\d+)(ms|s|m|h|d|w)$/;
const ISO = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,3})?)S)?)?$/;
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
/** 1000 years: anything longer is a mistake, not a retention period. */
const MAX_MS = 1000 * 365 * 86_400_000;

/**
 * The period in milliseconds; `code` (INVALID_DOMAIN for an event type,
 * INVALID_REQUEST for an option) with `what` in the message when it is not
 * one of the forms of {@link RetentionPeriod}.
 */
export function retentionMs(period: unknown, what: string, code: MnemeErrorCode = "INVALID_DOMAIN"): number {
  const ms = parse(period);
  if (ms === undefined || ms < 1 || ms > MAX_MS) {
    throw new MnemeError(
      code,
      `${what}: retainFor must be milliseconds (an integer >= 1), an ISO 8601 duration of days and time ("P30D", "PT12H") ` +
        `or an integer with ms, s, m, h, d or w ("30d"), at most 1000 years; got ${describe(period)}`,
    );
  }
  return ms;
}

function parse(period: unknown): number | undefined {
  if (typeof period === "number") return Number.isSafeInteger(period) ? period : undefined;
  if (typeof period !== "string") return undefined;
  const short = SHORT.exec(period);
  if (short !== null) return Number(short[1]) * UNIT_MS[short[2]!]!;
  const iso = ISO.exec(period);
  // "P" and "PT" alone name no duration.
  if (iso === null || period === "P" || period.endsWith("T")) return undefined;
  const [, d, h, m, s] = iso;
  if (d === undefined && h === undefined && m === undefined && s === undefined) return undefined;
  return Math.round(Number(d ?? 0) * 86_400_000 + Number(h ?? 0) * 3_600_000 + Number(m ?? 0) * 60_000 + Number(s ?? 0) * 1000);
}

function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number") return String(v);
  return v === null ? "null" : typeof v;
}
