/** Display helpers: numbers, times and ids as an operator reads them. */

const NUMBER = new Intl.NumberFormat("en-US");

export function num(n: number | undefined): string {
  return n === undefined || !Number.isFinite(n) ? "–" : NUMBER.format(n);
}

/** A rate with one decimal below 10. */
export function rate(n: number): string {
  if (!Number.isFinite(n)) return "–";
  return n < 10 ? n.toFixed(1) : NUMBER.format(Math.round(n));
}

/** Microseconds as µs or ms. */
export function micros(us: number | undefined): string {
  if (us === undefined || !Number.isFinite(us)) return "–";
  return us < 1000 ? `${Math.round(us)} µs` : `${(us / 1000).toFixed(1)} ms`;
}

/** A duration in ms as "3 d 4 h", "5 m 2 s", "800 ms". */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d} d ${hh} h`;
  if (hh > 0) return `${hh} h ${m} m`;
  if (m > 0) return `${m} m ${s % 60} s`;
  return `${s} s`;
}

/** ns since the epoch as a local date and time, `2026-11-24 09:41:07`; "–" for 0. */
export function timeNs(ns: number | undefined): string {
  if (ns === undefined || ns <= 0) return "–";
  const d = new Date(ns / 1e6);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** ns since the epoch as a local time of day with milliseconds. */
export function clockNs(ns: number): string {
  const d = new Date(ns / 1e6);
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** How long ago, from ns since the epoch. */
export function ago(ns: number | undefined, nowMs = Date.now()): string {
  if (ns === undefined || ns <= 0) return "never";
  const ms = nowMs - ns / 1e6;
  return ms < 1000 ? "just now" : `${duration(ms)} ago`;
}

/**
 * The last 8 characters of an id, after "…": time-ordered ids (uuid v7) made
 * together share their first blocks, so only the tail tells them apart (the
 * full id goes in the title).
 */
export function shortId(id: string | undefined): string {
  if (id === undefined) return "–";
  return id.length <= 12 ? id : `…${id.slice(-8)}`;
}

/** "host · pid 1234" of an instance, or its short id when the server does not say. */
export function instanceLabel(info: { instanceId: string; host?: string; pid?: number }): string {
  if (info.host === undefined || info.host === "") return `instance ${shortId(info.instanceId)}`;
  return info.pid === undefined || info.pid === 0 ? info.host : `${info.host} · pid ${info.pid}`;
}
