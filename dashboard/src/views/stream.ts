/** The live system-event stream: newest first, filter by kind, pause, each event's JSON on demand. */
import type { StreamEntry } from "../app.js";
import { fill, h } from "../dom.js";
import { clockNs } from "../format.js";
import type { SystemEvent } from "../types.js";
import { badge, jsonBlock, tenantLabel } from "../ui.js";
import type { View, ViewContext } from "./view.js";

const KIND_TONE: Readonly<Record<string, string>> = {
  CommandExecuted: "ok",
  EventsAppended: "info",
  CommandFailed: "bad",
  HandlerFailed: "bad",
  RestoreFailed: "bad",
  RestoreStarted: "violet",
  RestoreProgress: "violet",
  RestoreCompleted: "violet",
  EventHandlerStateChanged: "warn",
  HandlersInStandby: "warn",
  StoreEntryChanged: "info",
  SubscriberDropped: "warn",
};

const SHOWN = 200;

export function streamView({ app }: ViewContext): View {
  const el = h("div", { class: "page", "data-view": "stream" });
  const expanded = new Set<number>();
  let kind = "";
  let paused: StreamEntry[] | undefined;
  let frame = 0;

  const status = h("div", { class: "stream-status" });
  const list = h("ol", { class: "events", "data-events": "" });
  const kindSelect = h(
    "select",
    {
      "aria-label": "Kind",
      onchange: () => {
        kind = kindSelect.value;
        renderList();
      },
    },
    h("option", { value: "" }, "every kind"),
    Object.keys(KIND_TONE).map((k) => h("option", { value: k }, k)),
  );
  const pause = h(
    "button",
    {
      type: "button",
      class: "small",
      onclick: () => {
        paused = paused === undefined ? [...app.events] : undefined;
        pause.textContent = paused === undefined ? "Pause" : "Resume";
        renderList();
      },
    },
    "Pause",
  );
  const allTenants = h("input", {
    type: "checkbox",
    checked: app.allTenants,
    onchange: () => app.setAllTenants(allTenants.checked),
  });
  fill(
    el,
    h(
      "div",
      { class: "toolbar" },
      status,
      h("div", { class: "spacer" }),
      h("label", { class: "check", title: "Off: the session's tenant and system-wide events only" }, allTenants, "All tenants"),
      kindSelect,
      pause,
    ),
    list,
  );

  function renderStatus(): void {
    const s = app.stream;
    fill(
      status,
      h("span", { "data-stream-status": app.streamStatus }, badge(app.streamStatus)),
      app.streamStatus === "refused"
        ? h("span", { class: "error-text" }, `${app.streamDetail} — the live stream is for administrators.`)
        : h(
            "span",
            { class: "sub" },
            `last id ${s.lastEventId ?? "–"} · reconnects ${s.reconnects}${app.streamDetail === "" ? "" : ` · ${app.streamDetail}`}`,
          ),
    );
  }

  function renderList(): void {
    const entries = (paused ?? app.events).filter((e) => kind === "" || e.kind === "gap" || e.event.kind === kind).slice(0, SHOWN);
    fill(
      list,
      entries.length === 0
        ? h(
            "li",
            { class: "empty-note" },
            app.streamStatus === "refused" ? "No access to the stream." : "No events yet: dispatch a command and it shows here.",
          )
        : entries.map(item),
    );
  }

  function item(entry: StreamEntry): HTMLLIElement {
    if (entry.kind === "gap") {
      return h(
        "li",
        { class: "event gap", "data-kind": "gap" },
        h("span", { class: "time" }, clockNs(entry.at * 1e6)),
        badge("gap", "bad"),
        h(
          "span",
          { class: "summary" },
          `Events may have been missed after ${entry.gap.lastEventId} (${entry.gap.reason}); the views were reloaded.`,
        ),
      );
    }
    const e = entry.event;
    const open = expanded.has(e.id);
    return h(
      "li",
      { class: `event ${open ? "open" : ""}`, "data-kind": e.kind, "data-id": String(e.id) },
      h(
        "button",
        {
          type: "button",
          class: "event-line",
          "aria-expanded": open ? "true" : "false",
          onclick: () => {
            if (open) expanded.delete(e.id);
            else expanded.add(e.id);
            renderList();
          },
        },
        h("span", { class: "time" }, clockNs(e.at)),
        badge(e.kind, KIND_TONE[e.kind] ?? "muted"),
        h("span", { class: "summary" }, summary(e)),
        e.tenantUuid === undefined
          ? h("span", { class: "tenant", title: "system-wide" }, "system")
          : tenantLabel(app.tenantName(e.tenantUuid), e.tenantUuid),
      ),
      open ? jsonBlock(e) : null,
    );
  }

  const schedule = () => {
    if (frame !== 0) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      if (paused === undefined) renderList();
    });
  };
  renderStatus();
  renderList();
  const offs = [
    app.on("stream", schedule),
    app.on("status", () => {
      renderStatus();
      renderList();
    }),
  ];
  return {
    el,
    dispose: () => {
      offs.forEach((off) => off());
      cancelAnimationFrame(frame);
    },
  };
}

/** One line on what happened, from the kinds' data (docs/runtime.md, Kinds). */
export function summary(e: Pick<SystemEvent, "kind" | "data">): string {
  const d = e.data;
  const str = (k: string) => (d[k] === undefined ? "" : String(d[k] as string | number));
  switch (e.kind) {
    case "CommandExecuted":
      return `${str("domain")}.${str("name")} · ${str("events")} event(s) · ${str("durationMicros")} µs`;
    case "CommandFailed":
      return `${str("domain")}.${str("name")} ${str("status")}: ${str("code")} ${str("error")}`;
    case "EventsAppended": {
      const events = Array.isArray(d.events) ? (d.events as { path?: string; position?: number }[]) : [];
      return events.map((x) => `${x.path ?? "?"} @${x.position ?? "?"}`).join(", ");
    }
    case "EventHandlerStateChanged":
      return `${str("eventHandlerName")}: ${str("from")} → ${str("to")} (${str("restorationState")})`;
    case "RestoreStarted":
      return `${str("eventHandlerName")} ${d.fromZero === true ? "from zero" : `after ${str("afterPosition")}`}`;
    case "RestoreProgress":
      return `${str("eventHandlerName")}: ${str("eventsReplayed")} replayed, at ${str("position")} of ${str("head")}`;
    case "RestoreCompleted":
      return `${str("eventHandlerName")}: ${str("eventsReplayed")} replayed, ${str("eventsCaught")} caught, ${typeof d.durationMs === "number" ? d.durationMs.toFixed(1) : "?"} ms`;
    case "RestoreFailed":
      return `${str("eventHandlerName")}: ${d.cancelled === true ? "cancelled" : str("error")} at ${str("position")}`;
    case "HandlerFailed":
      return `${str("eventHandlerName")} at ${str("position")}: ${str("error")}`;
    case "HandlersInStandby":
      return Array.isArray(d.eventHandlerNames) ? (d.eventHandlerNames as string[]).join(", ") : "";
    case "StoreEntryChanged":
      return `${str("store")} ${str("action")} ${str("key")}`;
    default:
      return JSON.stringify(d).slice(0, 160);
  }
}
