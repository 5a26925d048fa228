/** System info at a glance: the app, its stores and counts, throughput, and each handler's health. */
import type { App } from "../app.js";
import { lineChart } from "../chart.js";
import { fill, h } from "../dom.js";
import { clockNs, duration, instanceLabel, num, timeNs } from "../format.js";
import { badge, card, empty, errorBanner, facts } from "../ui.js";
import { shardsPanel } from "./shards.js";
import { summary } from "./stream.js";
import type { View, ViewContext } from "./view.js";

export function overviewView({ app }: ViewContext): View {
  const el = h("div", { class: "page", "data-view": "overview" });
  const render = () => fill(el, ...content(app));
  render();
  const offs = [app.on("info", render), app.on("handlers", render)];
  return { el, dispose: () => offs.forEach((off) => off()) };
}

function content(app: App): (HTMLElement | null)[] {
  const info = app.info;
  if (info === undefined) return [app.loadError === undefined ? empty("Loading…") : errorBanner(app.loadError, "system info")];
  const failed = app.handlers.filter((x) => x.state === "failed");
  const totalLag = Object.values(app.metrics).reduce((a, m) => a + m.lag, 0);
  const now = Date.now();
  return [
    app.loadError === undefined ? null : errorBanner(app.loadError, "live data"),
    h(
      "div",
      { class: "kpis" },
      kpi("State", badge(info.state), `since ${timeNs(info.startedAt)}`),
      kpi("Uptime", duration(app.uptimeMs()), instanceLabel(info)),
      kpi("Head position", num(info.headPosition), "events in the event store"),
      kpi(
        "Event handlers",
        `${app.handlers.length}`,
        failed.length === 0 ? "none failed" : `${failed.length} failed`,
        failed.length > 0 ? "bad" : "",
      ),
      kpi("Total lag", num(totalLag), "events behind head", totalLag > 0 ? "warn" : ""),
    ),
    h(
      "div",
      { class: "grid two" },
      lineChart({
        id: "overview-throughput",
        title: "Events applied per second",
        unit: "events/s, per readmodel",
        series: Object.keys(app.metrics).map((name) => ({ name, points: app.throughput(name) })),
        windowMs: app.chartWindowMs(now),
        now,
      }),
      lineChart({
        id: "overview-commands",
        title: "Commands per second",
        unit: "from the live stream",
        series: [{ name: "commands", points: app.commandRate }],
        windowMs: app.chartWindowMs(now),
        now,
      }),
    ),
    failures(app),
    shardsPanel(app),
    h(
      "div",
      { class: "grid three" },
      card(
        "Application",
        facts([
          ["Name", info.appName],
          ["Version", info.version],
          ["Instance", h("span", { "data-instance": info.instanceId, title: info.instanceId }, instanceLabel(info))],
          ["Node.js", info.nodeVersion],
          ["Tenant", info.tenant ?? "every tenant"],
          ["Signed in as", `${app.api.session?.email ?? ""} · ${app.api.session?.tenantName ?? ""}`],
        ]),
      ),
      card("Registered", facts(Object.entries(info.counts).map(([k, v]) => [label(k), num(v)] as const))),
      card(
        "Stores",
        facts(Object.entries(info.stores).map(([k, v]) => [label(k), h("span", { class: "store-type" }, v)] as const)),
        info.unvalidated.length === 0
          ? h("p", { class: "ok-note" }, "Every command and query has a payload schema.")
          : h("div", { class: "banner warn" }, h("strong", null, "Not validated"), h("span", null, info.unvalidated.join(", "))),
      ),
    ),
  ];
}

const FAILURE_KINDS = new Set(["CommandFailed", "HandlerFailed", "RestoreFailed", "SubscriberDropped"]);

/**
 * The latest failures: the server's failure history (Runtime.ListFailures,
 * also what failed before the page opened), else what the live stream has
 * seen since the page opened; nothing when there are none.
 */
function failures(app: App): HTMLElement | null {
  const recent: { kind: string; at: number; tenantUuid?: string; data: Record<string, unknown> }[] = [];
  if (app.failures !== undefined) recent.push(...app.failures.slice(0, 5));
  else
    for (const e of app.events) {
      if (e.kind === "event" && FAILURE_KINDS.has(e.event.kind)) recent.push(e.event);
      if (recent.length === 5) break;
    }
  if (recent.length === 0) return null;
  return card(
    "Recent failures",
    h(
      "ul",
      { class: "failures", "data-source": app.failures === undefined ? "stream" : "runtime" },
      recent.map((e) =>
        h("li", { "data-kind": e.kind }, h("span", { class: "time" }, clockNs(e.at)), badge(e.kind, "bad"), h("span", null, summary(e))),
      ),
    ),
  );
}

function kpi(title: string, value: string | HTMLElement, sub: string, tone = ""): HTMLElement {
  return h(
    "div",
    { class: `kpi ${tone}` },
    h("span", { class: "kpi-title" }, title),
    h("span", { class: "kpi-value" }, value),
    h("span", { class: "kpi-sub" }, sub),
  );
}

function label(key: string): string {
  const spaced = key.replace(/([A-Z])/g, " $1").toLowerCase();
  return spaced.charAt(0).toUpperCase() + spaced.slice(1);
}
