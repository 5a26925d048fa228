/**
 * A page that lists entries of the process managers' and reactors' outboxes
 * (scheduled commands, dead letters) through a Runtime query, refreshed with
 * the page's polls, with per-row actions that go through a Runtime command.
 * The list is the session tenant's, as the Runtime scopes it; "All tenants"
 * (system administrators) asks for every tenant's and falls back once the
 * server refuses it.
 */
import { ApiError } from "../api.js";
import { type Child, fill, h } from "../dom.js";
import { empty, errorBanner, table } from "../ui.js";
import type { View, ViewContext } from "./view.js";

export interface RowAction<E> {
  /** `data-action` of the button. */
  id: string;
  label: string;
  /** Asks once more before acting (the second click within five seconds acts). */
  confirm?: string;
  run: (entry: E) => Promise<unknown>;
  /** What the row says after it worked. */
  done: string;
}

export interface OutboxListOptions<E> {
  view: string;
  /** The Runtime query listing the entries. */
  query: string;
  key: (entry: E) => string;
  columns: readonly { title: string; cell: (entry: E) => Child; num?: boolean }[];
  actions: readonly RowAction<E>[];
  emptyText: string;
  hint: string;
}

export function outboxListView<E>({ app, api }: ViewContext, o: OutboxListOptions<E>): View {
  const el = h("div", { class: "page", "data-view": o.view });
  const outcome = new Map<string, { ok: boolean; text: string }>();
  const pending = new Set<string>();
  const confirming = new Map<string, ReturnType<typeof setTimeout>>();
  let entries: E[] | undefined;
  let error: ApiError | undefined;
  let wide = app.allTenants;
  let loading: Promise<void> | undefined;
  let disposed = false;

  const load = (): Promise<void> =>
    (loading ??= (async () => {
      try {
        entries = await api.query<E[]>("Runtime", o.query, { limit: 1000, ...(wide ? { allTenants: true } : {}) });
        error = undefined;
      } catch (e) {
        if (wide && e instanceof ApiError && e.status === 403) {
          // Only system administrators see every tenant: the session tenant's then.
          wide = false;
          loading = undefined;
          await load();
          return;
        }
        error = e instanceof ApiError ? e : new ApiError(0, "ERROR", String(e));
      } finally {
        loading = undefined;
      }
      if (!disposed) render();
    })());

  async function act(entry: E, a: RowAction<E>): Promise<void> {
    const key = `${o.key(entry)}/${a.id}`;
    if (a.confirm !== undefined && !confirming.has(key)) {
      confirming.set(
        key,
        setTimeout(() => {
          confirming.delete(key);
          render();
        }, 5000),
      );
      render();
      return;
    }
    clearTimeout(confirming.get(key));
    confirming.delete(key);
    pending.add(o.key(entry));
    render();
    try {
      await a.run(entry);
      outcome.set(o.key(entry), { ok: true, text: a.done });
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError(0, "ERROR", String(e));
      outcome.set(o.key(entry), { ok: false, text: `${a.label} refused: ${err.detail} (${err.code})` });
    } finally {
      pending.delete(o.key(entry));
      await load();
    }
  }

  function row(entry: E): HTMLTableRowElement {
    const id = o.key(entry);
    const result = outcome.get(id);
    return h(
      "tr",
      { "data-entry": id },
      o.columns.map((c, i) =>
        h(
          "td",
          { class: c.num === true ? "num" : "", "data-label": c.title },
          c.cell(entry),
          i === 0 && result !== undefined
            ? h("div", { class: result.ok ? "ok-text" : "error-text", "data-outcome": result.ok ? "ok" : "refused" }, result.text)
            : null,
        ),
      ),
      h(
        "td",
        { class: "actions" },
        h(
          "div",
          { class: "action-group" },
          o.actions.map((a) => {
            const asking = confirming.has(`${id}/${a.id}`);
            return h(
              "button",
              {
                type: "button",
                class: `small ${asking ? "danger" : ""}`,
                "data-action": a.id,
                disabled: pending.has(id),
                onclick: () => void act(entry, a),
              },
              asking ? a.confirm! : a.label,
            );
          }),
        ),
      ),
    );
  }

  function render(): void {
    // Outcomes of entries that left the list (a retried dead letter, a cancelled command) are shown above it.
    const gone = [...outcome].filter(([id]) => !(entries ?? []).some((e) => o.key(e) === id));
    fill(
      el,
      error === undefined ? null : errorBanner(error, o.query),
      h(
        "div",
        { class: "toolbar" },
        h(
          "span",
          { class: "sub", "data-scope": wide ? "all" : "tenant" },
          wide ? "Every tenant" : `Tenant ${api.session?.tenantName ?? ""}`,
        ),
        h("div", { class: "spacer" }),
        h("button", { type: "button", class: "small", "data-action": "reload", onclick: () => void load() }, "Reload"),
      ),
      gone.map(([id, r]) =>
        h("div", { class: `banner ${r.ok ? "ok" : "bad"}`, "data-outcome": r.ok ? "ok" : "refused", "data-entry-gone": id }, r.text),
      ),
      entries === undefined
        ? empty(error === undefined ? "Loading…" : "")
        : entries.length === 0
          ? empty(o.emptyText)
          : table([...o.columns.map((c) => c.title), ""], entries.map(row), { class: `outbox ${o.view}` }),
      h("p", { class: "hint" }, o.hint),
    );
  }

  render();
  void load();
  const off = app.on("handlers", () => void load());
  return {
    el,
    dispose: () => {
      disposed = true;
      off();
      for (const t of confirming.values()) clearTimeout(t);
    },
  };
}
