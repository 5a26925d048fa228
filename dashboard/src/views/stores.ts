/** The five stores, for administrators: info and entries page by page. The server decides who may look. */
import { fill, h } from "../dom.js";
import { num, timeNs } from "../format.js";
import type { StoreInfo, StorePage } from "../types.js";
import { card, empty, errorBanner, facts, jsonBlock } from "../ui.js";
import type { View, ViewContext } from "./view.js";

const STORES = ["event", "command", "data", "cache", "log"] as const;
type Store = (typeof STORES)[number];
const TITLES: Readonly<Record<Store, string>> = {
  event: "EventStore",
  command: "CommandStore",
  data: "DataStore",
  cache: "CacheStore",
  log: "LogStore",
};
const PAGE = 25;

export function storesView({ api, app }: ViewContext): View {
  const el = h("div", { class: "page", "data-view": "stores" });
  let store: Store = "event";
  /** Cursors of the pages before the current one, to go back. */
  let cursors: (string | undefined)[] = [undefined];
  let disposed = false;
  const tabs = h("div", { class: "tabs", role: "tablist" });
  const body = h("div", { class: "store-body" });
  fill(el, h("div", { class: "toolbar" }, tabs), body);

  function renderTabs(): void {
    fill(
      tabs,
      STORES.map((s) =>
        h(
          "button",
          {
            type: "button",
            role: "tab",
            class: s === store ? "tab active" : "tab",
            "aria-selected": s === store ? "true" : "false",
            "data-store": s,
            onclick: () => {
              store = s;
              cursors = [undefined];
              renderTabs();
              void load();
            },
          },
          TITLES[s],
        ),
      ),
    );
  }

  async function load(): Promise<void> {
    const s = store;
    const cursor = cursors[cursors.length - 1];
    fill(body, empty("Loading…"));
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (cursor !== undefined) q.set("cursor", cursor);
    // "All tenants" (the stream's switch): every tenant's events, commands and log entries, else the session's tenant's.
    if (app.allTenants) q.set("allTenants", "true");
    let info: StoreInfo;
    let page: StorePage;
    try {
      [info, page] = await Promise.all([
        api.get<StoreInfo>(api.runtimePath(`stores/${s}/info`)),
        api.get<StorePage>(`${api.runtimePath(`stores/${s}/entries`)}?${q.toString()}`),
      ]);
    } catch (e) {
      if (!disposed && s === store)
        fill(
          body,
          h("div", { "data-store-error": "" }, errorBanner(e, TITLES[s])),
          h(
            "p",
            { class: "hint" },
            "The stores are for system administrators: an identity of the system tenant in a group that holds the store's permission.",
          ),
        );
      return;
    }
    if (disposed || s !== store) return;
    fill(
      body,
      h(
        "div",
        { class: "grid store-grid" },
        card(
          TITLES[s],
          facts([
            ["Type", info.storeType],
            ["Items", num(info.numItems)],
            ["Newest item", timeNs(info.lastItemCreatedAt)],
            ["Where", h("code", null, info.connectionInfo)],
          ]),
        ),
        h(
          "section",
          { class: "card entries", "data-entries": s },
          h(
            "div",
            { class: "entries-head" },
            h("h2", null, `Entries · page ${cursors.length}`),
            h("div", { class: "spacer" }),
            h(
              "button",
              { type: "button", class: "small", disabled: cursors.length === 1, onclick: () => (cursors.pop(), void load()) },
              "Previous",
            ),
            h(
              "button",
              {
                type: "button",
                class: "small",
                disabled: page.nextCursor === undefined,
                onclick: () => (cursors.push(page.nextCursor), void load()),
              },
              "Next",
            ),
          ),
          page.items.length === 0
            ? empty("This store is empty.")
            : h(
                "ol",
                { class: "entry-list" },
                page.items.map((item) => entry(s, item)),
              ),
        ),
      ),
    );
  }

  renderTabs();
  void load();
  return { el, dispose: () => (disposed = true) };
}

/** One entry: a headline from its well-known fields, the JSON below on demand. */
function entry(store: Store, item: unknown): HTMLLIElement {
  const r = (item ?? {}) as Record<string, unknown>;
  /** The first of `keys` that holds a string or a number, as text. */
  const pick = (...keys: string[]): string | undefined => {
    for (const k of keys) {
      const v = r[k];
      if (typeof v === "string" || typeof v === "number") return String(v);
    }
    return undefined;
  };
  const title =
    store === "event"
      ? `#${pick("position") ?? "?"} ${pick("path", "name") ?? ""}`
      : store === "command"
        ? `${pick("domain") ?? ""}.${pick("name") ?? ""} · ${pick("status") ?? ""}`
        : store === "log"
          ? `${pick("level") ?? ""} ${pick("source") ?? ""}: ${pick("message") ?? ""}`
          : (pick("key") ?? "");
  const details = h(
    "details",
    null,
    h(
      "summary",
      null,
      h("span", { class: "name" }, title),
      // An event of a type with tags (DCB) shows them: "key:value" strings.
      store === "event" && Array.isArray(r.tags) && r.tags.length > 0
        ? h("span", { class: "sub tags", title: "tags" }, r.tags.map(String).join(" "))
        : null,
      h("span", { class: "sub" }, timeNs(numberOr(r.createdAt ?? r.at ?? r.timestamp))),
    ),
    jsonBlock(item),
  );
  return h("li", null, details);
}

function numberOr(v: unknown): number | undefined {
  return typeof v === "number" ? v : undefined;
}
