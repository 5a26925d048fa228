/**
 * A page that lists entries of the process managers' and reactors' outboxes
 * (scheduled commands, dead letters) through a Runtime query followed live
 * (the server sends the list again when it changed: no polling), with per-row
 * actions that go through a Runtime command.
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
  /** Rows a page (default 20): a real app's hundreds of entries are paged, not one endless page. */
  pageSize?: number;
  /** Ways to group the rows (a select in the toolbar; each group has a row of its own with a count and a checkbox). */
  groupBy?: readonly { id: string; label: string; key: (entry: E) => string }[];
}

export function outboxListView<E>({ app, api }: ViewContext, o: OutboxListOptions<E>): View {
  const el = h("div", { class: "page", "data-view": o.view });
  const outcome = new Map<string, { ok: boolean; text: string }>();
  const pending = new Set<string>();
  const confirming = new Map<string, ReturnType<typeof setTimeout>>();
  let entries: E[] | undefined;
  let error: ApiError | undefined;
  let wide = app.allTenants;
  let disposed = false;
  const pageSize = o.pageSize ?? 20;
  let page = 1;
  let grouping = "";
  /** Entries picked for a bulk action, by key. */
  const selected = new Set<string>();
  let bulkOutcome: { ok: boolean; text: string } | undefined;
  let bulkRunning = false;

  let unfollow: (() => void) | undefined;
  /** Follows the list on the page's live-query stream; a refused "every tenant" follows the session tenant's instead. */
  const follow = (): void => {
    unfollow?.();
    unfollow = app.live.follow<E[]>(
      o.view,
      "Runtime",
      o.query,
      { limit: 1000, ...(wide ? { allTenants: true } : {}) },
      {
        onResult: (list) => {
          entries = list;
          error = undefined;
          const present = new Set(list.map(o.key));
          for (const k of selected) if (!present.has(k)) selected.delete(k);
          if (!disposed) render();
        },
        onRefused: (e) => {
          if (disposed) return;
          if (wide && e.status === 403) {
            // Only system administrators see every tenant: the session tenant's then.
            wide = false;
            follow();
            return;
          }
          error = e;
          render();
        },
        onTrouble: (e) => {
          error = e;
          if (!disposed) render();
        },
      },
    );
  };

  /**
   * An action that asks once more: false on the first click (the button says so
   * for five seconds), true on the second; always true for the others.
   */
  function confirmed(a: RowAction<E>, key: string): boolean {
    if (a.confirm !== undefined && !confirming.has(key)) {
      confirming.set(
        key,
        setTimeout(() => {
          confirming.delete(key);
          render();
        }, 5000),
      );
      render();
      return false;
    }
    clearTimeout(confirming.get(key));
    confirming.delete(key);
    return true;
  }

  async function act(entry: E, a: RowAction<E>): Promise<void> {
    if (!confirmed(a, `${o.key(entry)}/${a.id}`)) return;
    pending.add(o.key(entry));
    render();
    try {
      await a.run(entry);
      outcome.set(o.key(entry), { ok: true, text: a.done });
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError(0, "ERROR", String(e));
      outcome.set(o.key(entry), { ok: false, text: `${a.label} refused: ${err.detail} (${err.code})` });
    } finally {
      // The list follows by itself (the live query runs again after the command).
      pending.delete(o.key(entry));
      render();
    }
  }

  /** Runs an action on every selected entry, one command each (each with its own permission check), then says how many went through. */
  async function bulk(a: RowAction<E>): Promise<void> {
    if (!confirmed(a, `bulk/${a.id}`)) return;
    const targets = (entries ?? []).filter((e) => selected.has(o.key(e)));
    bulkRunning = true;
    render();
    const refused: string[] = [];
    for (const e of targets) {
      try {
        await a.run(e);
        selected.delete(o.key(e));
      } catch (err) {
        const x = err instanceof ApiError ? err : new ApiError(0, "ERROR", String(err));
        refused.push(`${x.detail} (${x.code})`);
      }
    }
    const done = targets.length - refused.length;
    bulkOutcome =
      refused.length === 0
        ? { ok: true, text: `${a.done}: ${done} of ${targets.length}` }
        : {
            ok: false,
            text: `${a.label}: ${done} of ${targets.length} done; ${refused.length} refused: ${[...new Set(refused)].join("; ")}`,
          };
    bulkRunning = false;
    render();
  }

  /** The entries in display order: grouped (groups in order of first appearance) or as listed. */
  function ordered(): { entry: E; group: string | undefined }[] {
    const list = entries ?? [];
    const by = o.groupBy?.find((g) => g.id === grouping);
    if (by === undefined) return list.map((entry) => ({ entry, group: undefined }));
    const groups = new Map<string, E[]>();
    for (const e of list) {
      const k = by.key(e);
      groups.set(k, [...(groups.get(k) ?? []), e]);
    }
    return [...groups].flatMap(([k, es]) => es.map((entry) => ({ entry, group: k })));
  }

  function toggle(keys: readonly string[], on: boolean): void {
    for (const k of keys) {
      if (on) selected.add(k);
      else selected.delete(k);
    }
    bulkOutcome = undefined;
    render();
  }

  function checkbox(keys: readonly string[], label: string, attrs: Record<string, string>): HTMLInputElement {
    const all = keys.length > 0 && keys.every((k) => selected.has(k));
    const box = h("input", { type: "checkbox", "aria-label": label, ...attrs, onchange: () => toggle(keys, box.checked) });
    box.checked = all;
    box.indeterminate = !all && keys.some((k) => selected.has(k));
    return box;
  }

  /** The row that heads a group: its key, how many entries it has, and a checkbox that picks them all. */
  function groupRow(group: string, members: readonly E[]): HTMLTableRowElement {
    const keys = members.map(o.key);
    return h(
      "tr",
      { class: "group", "data-group": group },
      h(
        "td",
        { colspan: o.columns.length + 1 },
        h(
          "label",
          { class: "group-head" },
          checkbox(keys, `select the ${members.length} entries of ${group}`, { "data-select-group": group }),
          h("span", { class: "name" }, group),
          h("span", { class: "badge muted", "data-group-count": String(members.length) }, String(members.length)),
        ),
      ),
    );
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
          // The checkbox sits in the first cell, so the narrow layout's cards need no line of their own for it.
          i === 0 ? h("label", { class: "pick" }, checkbox([id], "select this entry", { "data-select": id })) : null,
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
        h("button", { type: "button", class: "small", "data-action": "reload", onclick: () => follow() }, "Reload"),
      ),
      // Many single outcomes (after a bulk action) would push the list off the page: the last three, and the bulk line.
      gone
        .slice(-3)
        .map(([id, r]) =>
          h("div", { class: `banner ${r.ok ? "ok" : "bad"}`, "data-outcome": r.ok ? "ok" : "refused", "data-entry-gone": id }, r.text),
        ),
      bulkOutcome === undefined
        ? null
        : h(
            "div",
            { class: `banner ${bulkOutcome.ok ? "ok" : "bad"}`, "data-bulk-outcome": bulkOutcome.ok ? "ok" : "refused" },
            bulkOutcome.text,
          ),
      entries === undefined ? empty(error === undefined ? "Loading…" : "") : entries.length === 0 ? empty(o.emptyText) : listing(),
      h("p", { class: "hint" }, o.hint),
    );
  }

  /** The bulk bar, the page of rows (with group rows) and the pager. */
  function listing(): HTMLElement[] {
    const all = ordered();
    const pages = Math.max(1, Math.ceil(all.length / pageSize));
    page = Math.min(page, pages);
    const shown = all.slice((page - 1) * pageSize, page * pageSize);
    const rows: HTMLTableRowElement[] = [];
    let last: string | undefined;
    for (const { entry, group } of shown) {
      if (group !== undefined && group !== last)
        rows.push(
          groupRow(
            group,
            all.filter((x) => x.group === group).map((x) => x.entry),
          ),
        );
      last = group;
      rows.push(row(entry));
    }
    const pageKeys = shown.map((x) => o.key(x.entry));
    const bar = h(
      "div",
      { class: "toolbar bulk" },
      h("label", null, checkbox(pageKeys, "select this page", { "data-select-page": "" }), " this page"),
      o.groupBy === undefined || o.groupBy.length === 0
        ? null
        : h(
            "label",
            null,
            "Group by ",
            h(
              "select",
              {
                "data-group-by": "",
                onchange: (ev: Event) => {
                  grouping = (ev.target as HTMLSelectElement).value;
                  page = 1;
                  render();
                },
              },
              h("option", { value: "", selected: grouping === "" }, "nothing"),
              o.groupBy.map((g) => h("option", { value: g.id, selected: grouping === g.id }, g.label)),
            ),
          ),
      h("span", { class: "sub", "data-selected": String(selected.size) }, `${selected.size} selected`),
      h("div", { class: "spacer" }),
      o.actions.map((a) => {
        const asking = confirming.has(`bulk/${a.id}`);
        return h(
          "button",
          {
            type: "button",
            class: `small ${asking ? "danger" : ""}`,
            "data-bulk-action": a.id,
            disabled: selected.size === 0 || bulkRunning,
            onclick: () => void bulk(a),
          },
          asking ? `${a.confirm!} (${selected.size})` : `${a.label} selected`,
        );
      }),
    );
    const pager = h(
      "div",
      { class: "toolbar pager", "data-page": String(page), "data-pages": String(pages) },
      h(
        "button",
        {
          type: "button",
          class: "small",
          "data-page-step": "prev",
          disabled: page <= 1,
          onclick: () => {
            page -= 1;
            render();
          },
        },
        "‹ Previous",
      ),
      h("span", { class: "sub" }, `Page ${page} of ${pages} · ${all.length} entries`),
      h(
        "button",
        {
          type: "button",
          class: "small",
          "data-page-step": "next",
          disabled: page >= pages,
          onclick: () => {
            page += 1;
            render();
          },
        },
        "Next ›",
      ),
    );
    return [bar, table([...o.columns.map((c) => c.title), ""], rows, { class: `outbox ${o.view}` }), pager];
  }

  render();
  follow();
  return {
    el,
    dispose: () => {
      disposed = true;
      unfollow?.();
      for (const t of confirming.values()) clearTimeout(t);
    },
  };
}
