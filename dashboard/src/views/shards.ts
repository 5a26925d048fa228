/**
 * The shards of a sharded app (mneme/shards): each shard with its head and
 * tenants, and where each tenant lives, from the `Shards` queries every
 * shard's facade answers (system administrators). Absent for a plain app.
 */
import type { App } from "../app.js";
import { h } from "../dom.js";
import { num } from "../format.js";
import { badge, card, table } from "../ui.js";

/** A card with the shards and the placements; null when the server is no sharded app (or the caller may not see it). */
export function shardsPanel(app: App): HTMLElement | null {
  const shards = app.shards;
  if (shards === undefined) return null;
  const placements = app.placements ?? [];
  return card(
    "Shards",
    table(
      ["Shard", "Location", "Tenants", "Head position", "Frozen tenants"],
      shards.map((s) =>
        h(
          "tr",
          { "data-shard": s.name },
          h("td", { class: "handler" }, h("div", { class: "name" }, s.name), s.home ? badge("home", "violet") : null),
          h("td", { "data-label": "Location" }, h("code", null, s.description)),
          h("td", { class: "num", "data-label": "Tenants" }, num(s.tenants)),
          h("td", { class: "num", "data-label": "Head position" }, num(s.head)),
          h("td", { "data-label": "Frozen tenants" }, s.frozenTenants.length === 0 ? "–" : s.frozenTenants.join(", ")),
        ),
      ),
      { class: "shards" },
    ),
    table(
      ["Tenant", "Shard", "State", "Version"],
      placements.map((p) =>
        h(
          "tr",
          { "data-placement": p.tenantUuid },
          h("td", { "data-label": "Tenant" }, h("code", null, p.tenantUuid)),
          h("td", { "data-label": "Shard" }, p.shard),
          h("td", { "data-label": "State" }, badge(p.state, p.state === "active" ? "ok" : "warn")),
          h("td", { class: "num", "data-label": "Version" }, num(p.version)),
        ),
      ),
      { class: "placements" },
    ),
  );
}
