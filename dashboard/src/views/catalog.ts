/** Commands, queries and events: who may send them, and each one's JSON Schema. */
import { ApiError } from "../api.js";
import { fill, h } from "../dom.js";
import type { CommandEntry, EventEntry, QueryEntry } from "../types.js";
import { empty, errorBanner, jsonBlock, permissionBadge, table } from "../ui.js";
import type { View, ViewContext } from "./view.js";

type Tab = "commands" | "queries" | "events";

interface Row {
  domain: string;
  name: string;
  description: string;
  permission?: string;
}

export function catalogView({ api }: ViewContext): View {
  const el = h("div", { class: "page", "data-view": "catalog" });
  const rows: Partial<Record<Tab, Row[]>> = {};
  let tab: Tab = "commands";
  let filter = "";
  let selected: Row | undefined;
  let disposed = false;

  const tabs = h("div", { class: "tabs", role: "tablist" });
  const search = h("input", {
    type: "search",
    placeholder: "Filter by domain, name or description",
    "aria-label": "Filter",
    oninput: () => {
      filter = search.value.trim().toLowerCase();
      renderList();
    },
  });
  const listBox = h("div", { class: "catalog-list" });
  const schemaBox = h("aside", { class: "schema-panel card", "data-schema": "" });
  fill(el, h("div", { class: "toolbar" }, tabs, h("div", { class: "spacer" }), search), h("div", { class: "split" }, listBox, schemaBox));

  function renderTabs(): void {
    fill(
      tabs,
      (["commands", "queries", "events"] as const).map((t) =>
        h(
          "button",
          {
            type: "button",
            role: "tab",
            class: t === tab ? "tab active" : "tab",
            "aria-selected": t === tab ? "true" : "false",
            onclick: () => {
              tab = t;
              selected = undefined;
              renderTabs();
              void load();
            },
          },
          t.charAt(0).toUpperCase() + t.slice(1),
          rows[t] === undefined ? null : h("span", { class: "count" }, String(rows[t].length)),
        ),
      ),
    );
  }

  async function load(): Promise<void> {
    if (rows[tab] === undefined) {
      fill(listBox, empty("Loading…"));
      try {
        rows[tab] = await fetchRows(tab);
      } catch (e) {
        fill(listBox, errorBanner(e, tab));
        return;
      }
      if (disposed) return;
      renderTabs();
    }
    renderList();
    renderSchema();
  }

  async function fetchRows(t: Tab): Promise<Row[]> {
    return appFirst(await fetchEntries(t));
  }

  async function fetchEntries(t: Tab): Promise<Row[]> {
    const path = api.runtimePath(t);
    if (t === "commands")
      return (await api.getAll<CommandEntry>(path)).map((c) => ({
        domain: c.domain,
        name: c.domainCmdName,
        description: c.description,
        permission: c.permission,
      }));
    if (t === "queries")
      return (await api.getAll<QueryEntry>(path)).map((q) => ({
        domain: q.domain,
        name: q.domainQryName,
        description: q.description,
        permission: q.permission,
      }));
    return (await api.getAll<EventEntry>(path)).map((e) => ({
      domain: e.domain,
      name: e.domainEvtName,
      // A type with tags (DCB) says so; its entries in the EventStore show the tags.
      description: e.tagged === true ? `${e.description} [tagged]`.trim() : e.description,
    }));
  }

  function renderList(): void {
    const all = rows[tab] ?? [];
    const shown = all.filter((r) => filter === "" || `${r.domain}.${r.name} ${r.description}`.toLowerCase().includes(filter));
    const head =
      tab === "events"
        ? ["Domain", "Event", "Description"]
        : ["Domain", tab === "commands" ? "Command" : "Query", "Permission", "Description"];
    fill(
      listBox,
      shown.length === 0
        ? empty("Nothing matches.")
        : table(
            head,
            shown.map((r) =>
              h(
                "tr",
                {
                  class: selected === r ? "selected clickable" : "clickable",
                  "data-message": `${r.domain}.${r.name}`,
                  tabindex: 0,
                  onclick: () => select(r),
                  onkeydown: (ev: Event) => {
                    if ((ev as KeyboardEvent).key === "Enter") select(r);
                  },
                },
                h("td", { class: "sub" }, r.domain),
                h("td", { class: "name" }, r.name),
                r.permission === undefined ? null : h("td", null, permissionBadge(r.permission)),
                h("td", { class: "description" }, r.description),
              ),
            ),
          ),
    );
  }

  function select(r: Row): void {
    selected = r;
    renderList();
    renderSchema();
  }

  function renderSchema(): void {
    const r = selected;
    if (r === undefined) {
      fill(schemaBox, h("h2", null, "JSON Schema"), empty("Pick a row to see its payload's JSON Schema 2020-12."));
      return;
    }
    fill(schemaBox, h("h2", null, `${r.domain}.${r.name}`), empty("Loading…"));
    api.post<unknown>(api.runtimePath("schema"), { domain: r.domain, type: r.name }).then(
      (schema) => {
        if (selected !== r) return;
        fill(
          schemaBox,
          h("h2", null, `${r.domain}.${r.name}`),
          r.permission === undefined ? null : h("p", null, "Permission: ", permissionBadge(r.permission)),
          jsonBlock(schema),
        );
      },
      (e: unknown) => {
        if (selected !== r) return;
        // The row came from the registry: UNKNOWN_SCHEMA_TYPE means the type has no schema, a fact, not a failure.
        const none = e instanceof ApiError && e.code === "UNKNOWN_SCHEMA_TYPE";
        fill(
          schemaBox,
          h("h2", null, `${r.domain}.${r.name}`),
          r.permission === undefined ? null : h("p", null, "Permission: ", permissionBadge(r.permission)),
          none
            ? h(
                "p",
                { class: "note", "data-no-schema": "" },
                `No schema: ${r.domain}.${r.name} was registered without a payload schema, so its payloads are not validated. Give it a \`schema\` option or run \`mneme schema build\` (docs/runtime.md, Schemas).`,
              )
            : errorBanner(e, "schema"),
        );
      },
    );
  }

  renderTabs();
  void load();
  return { el, dispose: () => (disposed = true) };
}

/** The domains every mneme app has (the Runtime, and the built-in ones of mneme/defaults). */
const BUILT_IN = new Set(["Runtime", "Tenant", "Account", "Identity", "Group"]);

/** The application's own domains first, then the built-in ones, each in the server's order. */
function appFirst(rows: Row[]): Row[] {
  return [...rows.filter((r) => !BUILT_IN.has(r.domain)), ...rows.filter((r) => BUILT_IN.has(r.domain))];
}
