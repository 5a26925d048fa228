/** Small building blocks the views share: badges, cards, tables, JSON, errors. */
import { ApiError } from "./api.js";
import { type Child, h } from "./dom.js";
import { shortId } from "./format.js";

const STATE_TONE: Readonly<Record<string, string>> = {
  running: "ok",
  restored: "ok",
  live: "ok",
  started: "ok",
  restoring: "info",
  starting: "info",
  connecting: "info",
  reconnecting: "warn",
  standby: "warn",
  stopped: "muted",
  idle: "muted",
  cancelled: "warn",
  failed: "bad",
  refused: "bad",
};

/** A coloured pill for a state word. */
export function badge(text: string, tone = STATE_TONE[text] ?? "muted"): HTMLElement {
  return h("span", { class: `badge ${tone}` }, text);
}

export function card(title: Child, ...body: Child[]): HTMLElement {
  return h("section", { class: "card" }, h("h2", null, title), ...body);
}

/** A definition list of label / value pairs. */
export function facts(rows: readonly (readonly [string, Child])[]): HTMLElement {
  return h(
    "dl",
    { class: "facts" },
    rows.map(([k, v]) => [h("dt", null, k), h("dd", null, v)]),
  );
}

export function table(head: readonly string[], rows: readonly HTMLTableRowElement[], attrs: Record<string, string> = {}): HTMLElement {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      attrs,
      h(
        "thead",
        null,
        h(
          "tr",
          null,
          head.map((c) => h("th", null, c)),
        ),
      ),
      h("tbody", null, rows),
    ),
  );
}

/** An error as the operator should read it: what the server said and its code. */
export function errorBanner(e: unknown, what = ""): HTMLElement {
  const err = e instanceof ApiError ? e : new ApiError(0, "ERROR", String(e));
  const title =
    err.status === 403
      ? "Refused by the server"
      : err.status === 401
        ? "Not signed in"
        : err.status === 0
          ? "No connection"
          : `Error ${err.status}`;
  return h(
    "div",
    { class: `banner ${err.status === 403 ? "denied" : "bad"}`, role: "alert", "data-error-code": err.code },
    h("strong", null, what === "" ? title : `${title}: ${what}`),
    h("span", null, err.detail),
    h("code", null, err.code),
  );
}

/** Pretty JSON with keys, strings, numbers and literals in their own colours (text nodes only). */
export function jsonBlock(value: unknown): HTMLElement {
  const text = JSON.stringify(value, null, 2) ?? "undefined";
  const pre = h("pre", { class: "json" });
  const token = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;
  let last = 0;
  for (let m = token.exec(text); m !== null; m = token.exec(text)) {
    if (m.index > last) pre.append(text.slice(last, m.index));
    const cls = m[1] !== undefined ? (m[2] !== undefined ? "k" : "s") : m[3] !== undefined ? "l" : "n";
    pre.append(h("span", { class: cls }, m[1] ?? m[0]));
    if (m[2] !== undefined) pre.append(m[2]);
    last = token.lastIndex;
  }
  pre.append(text.slice(last));
  return pre;
}

/** A permission level as a badge: who may send it. */
export function permissionBadge(permission: string): HTMLElement {
  const tone = permission === "Anonymous" ? "warn" : permission === "Administrator" ? "bad" : permission === "Custom" ? "info" : "muted";
  return h("span", { class: `badge perm ${tone}`, title: permissionHelp(permission) }, permission);
}

function permissionHelp(p: string): string {
  switch (p) {
    case "Anonymous":
      return "anyone, without a session";
    case "Authenticated":
      return "any session";
    case "Authorized":
      return "an identity whose groups hold the permission";
    case "Administrator":
      return "only the authorizer grants it (system administrators)";
    case "Custom":
      return "a permission function decides";
    default:
      return p;
  }
}

export function empty(text: string): HTMLElement {
  return h("p", { class: "empty-note" }, text);
}

/** A tenant as an operator tells tenants apart: its name when known, else the distinguishing tail of its id; the full id in the title. */
export function tenantLabel(name: string | undefined, tenantUuid: string | undefined): HTMLElement {
  if (tenantUuid === undefined) return h("span", { class: "tenant" }, "–");
  if (name !== undefined) return h("span", { class: "tenant", title: tenantUuid, "data-tenant": tenantUuid }, name);
  return h("code", { class: "tenant", title: tenantUuid, "data-tenant": tenantUuid }, shortId(tenantUuid));
}
