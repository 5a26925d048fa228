/** Event handlers: state, restoration, position, lag and metrics, with restore / stop / start. */
import { ApiError } from "../api.js";
import type { App } from "../app.js";
import { lineChart } from "../chart.js";
import { fill, h } from "../dom.js";
import { ago, instanceLabel, micros, num, shortId } from "../format.js";
import type { EventHandlerInfo } from "../types.js";
import { badge, empty, errorBanner, table } from "../ui.js";
import { integrationPanel } from "./integration.js";
import type { View, ViewContext } from "./view.js";

type Action = "restore" | "restore-zero" | "stop" | "start";

export function handlersView({ app, api }: ViewContext): View {
  const el = h("div", { class: "page", "data-view": "handlers" });
  const pending = new Map<string, Action>();
  const confirming = new Map<string, ReturnType<typeof setTimeout>>();
  const outcome = new Map<string, { ok: boolean; text: string }>();

  async function run(name: string, action: Action): Promise<void> {
    if (action === "restore-zero" && !confirming.has(name)) {
      // A rebuild from the first event is long on a big store: the button asks once more.
      const expire = () => {
        confirming.delete(name);
        render();
      };
      confirming.set(name, setTimeout(expire, 5000));
      render();
      return;
    }
    clearTimeout(confirming.get(name));
    confirming.delete(name);
    pending.set(name, action);
    outcome.delete(name);
    render();
    const body =
      action === "restore-zero" ? { action: "restore", eventHandlerName: name, restoreFromZero: true } : { action, eventHandlerName: name };
    try {
      const after = await api.post<EventHandlerInfo>(api.runtimePath("event-handler-list"), body);
      outcome.set(name, {
        ok: true,
        text: `${verb(action)}: now ${after.state}${after.isStateRestorer ? ` / ${after.restorationState}` : ""}`,
      });
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError(0, "ERROR", String(e));
      outcome.set(name, { ok: false, text: `${verb(action)} refused: ${err.detail} (${err.code})` });
    } finally {
      // The list follows by itself: the server's live queries run again on the handler's state change.
      pending.delete(name);
      render();
    }
  }

  function row(x: EventHandlerInfo): HTMLTableRowElement {
    const m = app.metrics[x.eventHandlerName];
    const head = app.info?.headPosition ?? 0;
    const progress = app.restoring.get(x.eventHandlerName);
    const position = progress?.position ?? x.lastPosition;
    const of = progress?.head ?? head;
    const pct = of > 0 ? Math.min(100, Math.round((position / of) * 100)) : 100;
    const busy = pending.get(x.eventHandlerName);
    const result = outcome.get(x.eventHandlerName);
    const restoring = x.restorationState === "restoring";
    const button = (action: Action, text: string, enabled: boolean, cls = "") =>
      h(
        "button",
        {
          type: "button",
          class: `small ${cls}`,
          "data-action": action,
          disabled: !enabled || busy !== undefined,
          onclick: () => void run(x.eventHandlerName, action),
        },
        busy === action ? `${verb(action)}…` : text,
      );
    return h(
      "tr",
      { "data-handler": x.eventHandlerName, "data-state": x.state, "data-restoration": x.restorationState },
      h(
        "td",
        { class: "handler" },
        h("div", { class: "name" }, x.eventHandlerName),
        h(
          "div",
          { class: "sub" },
          `${x.domain} · ${x.domainEvents.length === 1 && x.domainEvents[0] === "*" ? "every event" : `${x.domainEvents.length} event types`}`,
        ),
        // A restore that found nothing to replay (the one at start, usually) is not worth a line.
        m?.lastRestore === undefined || m.lastRestore.eventsReplayed + m.lastRestore.eventsCaught === 0
          ? null
          : h(
              "div",
              { class: "sub", "data-last-restore": "" },
              `last restore: ${num(m.lastRestore.eventsReplayed)} replayed, ${num(m.lastRestore.eventsCaught)} caught, ${m.lastRestore.durationMs.toFixed(1)} ms`,
            ),
        x.holder === undefined
          ? null
          : h("div", { class: "sub", "data-holder": x.holder, title: x.holder }, `on ${holderLabel(app, x.holder)}`),
        x.integration === undefined
          ? null
          : h(
              "div",
              { class: "sub", "data-link": x.integration.role },
              `${x.integration.broker} ${x.integration.role} · ${x.integration.target}`,
            ),
        x.partitions === undefined ? null : partitionList(app, x),
        x.lastError === undefined ? null : h("div", { class: "error-text" }, x.lastError),
        result === undefined
          ? null
          : h("div", { class: result.ok ? "ok-text" : "error-text", "data-outcome": result.ok ? "ok" : "refused" }, result.text),
      ),
      h("td", { "data-label": "State" }, stateBadge(x)),
      h(
        "td",
        { class: "num", "data-label": "Position / head" },
        h("div", null, `${num(position)} / ${num(of)}`),
        h("div", { class: `bar ${restoring ? "active" : ""}` }, h("progress", { max: 100, value: pct, "aria-label": `${pct}% of head` })),
        progress === undefined ? null : h("div", { class: "sub" }, `${num(progress.eventsReplayed)} replayed`),
      ),
      h("td", { class: `num ${m !== undefined && m.lag > 0 ? "warn-text" : ""}`, "data-label": "Lag" }, m === undefined ? "–" : num(m.lag)),
      h(
        "td",
        { class: "num", "data-label": "Processed" },
        m === undefined ? "–" : num(m.eventsProcessed),
        m !== undefined && m.eventsFailed > 0 ? h("div", { class: "error-text" }, `${num(m.eventsFailed)} failed`) : null,
      ),
      h(
        "td",
        { class: "num", "data-label": "Mean / p99" },
        // Nothing handled yet: no time to show (not "0 µs").
        m === undefined || m.eventsProcessed === 0 ? "—" : `${micros(m.meanHandleMicros)} / ${micros(m.p99HandleMicros)}`,
      ),
      h("td", { "data-label": "Last event" }, ago(x.lastEventTimestamp)),
      h(
        "td",
        { class: "actions" },
        h(
          "div",
          { class: "action-group" },
          x.isStateRestorer ? button("restore", "Restore", !restoring && x.state !== "standby") : null,
          x.isStateRestorer
            ? button(
                "restore-zero",
                confirming.has(x.eventHandlerName) ? "Confirm: rebuild" : "From zero",
                !restoring && x.state !== "standby",
                confirming.has(x.eventHandlerName) ? "danger" : "",
              )
            : null,
          button("stop", "Stop", x.state !== "stopped"),
          button("start", "Start", x.state === "stopped" || x.state === "failed"),
        ),
      ),
    );
  }

  function render(): void {
    const now = Date.now();
    const names = Object.keys(app.metrics);
    fill(
      el,
      app.loadError === undefined ? null : errorBanner(app.loadError, "live data"),
      app.handlers.length === 0
        ? empty(app.loadError === undefined ? "Loading…" : "No event handlers to show.")
        : table(["Handler", "State", "Position / head", "Lag", "Processed", "Mean / p99", "Last event", ""], app.handlers.map(row), {
            class: "handlers",
          }),
      integrationPanel(app.handlers),
      h(
        "div",
        { class: "grid two" },
        lineChart({
          id: "throughput",
          title: "Throughput",
          unit: "events/s",
          series: names.map((n) => ({ name: n, points: app.throughput(n) })),
          windowMs: app.chartWindowMs(now),
          now,
        }),
        lineChart({
          id: "lag",
          title: "Lag",
          unit: "events behind head",
          series: names.map((n) => ({ name: n, points: app.lag(n) })),
          windowMs: app.chartWindowMs(now),
          now,
        }),
      ),
      h(
        "p",
        { class: "hint" },
        "Restore replays from the checkpoint. From zero rebuilds the readmodel from the first event beside the served data, which queries keep reading until the rebuild has caught up and is switched in at once; live events are caught and applied after, each once. Stop and Start need an administrator.",
      ),
    );
  }

  render();
  const off = app.on("handlers", render);
  return {
    el,
    dispose: () => {
      off();
      for (const t of confirming.values()) clearTimeout(t);
    },
  };
}

/** A partitioned handler's partitions: each with its state, the instance that applies it and its position. */
function partitionList(app: App, x: EventHandlerInfo): HTMLElement {
  return h(
    "ul",
    { class: "sub partitions", "data-partitions": String(x.partitions!.length) },
    ...x.partitions!.map((p) =>
      h(
        "li",
        { "data-partition": String(p.partition), "data-state": p.state },
        `partition ${p.partition}: `,
        badge(p.state),
        ` ${p.holder === undefined ? "no holder" : `on ${holderLabel(app, p.holder)}`} · at ${num(p.lastPosition)}`,
      ),
    ),
  );
}

function verb(a: Action): string {
  return a === "restore" ? "Restore" : a === "restore-zero" ? "Restore from zero" : a === "stop" ? "Stop" : "Start";
}

/**
 * One badge for a handler: its state, or what a restore is doing when that
 * says more (restoring, a failed or cancelled restore of a running handler).
 * A failed handler is "failed", never "failed" and "restored" at once.
 */
function stateBadge(x: EventHandlerInfo): HTMLElement {
  if (!x.isStateRestorer || x.state === "failed" || x.state === "stopped" || x.state === "standby") return badge(x.state);
  if (x.restorationState === "restoring") return badge("restoring");
  if (x.restorationState === "failed" || x.restorationState === "cancelled") return badge(`restore ${x.restorationState}`, "warn");
  return badge(x.state);
}

/** This instance by host and process; another instance by the tail of its id (the full id in the title). */
function holderLabel(app: App, holder: string): string {
  const info = app.info;
  if (info !== undefined && info.instanceId === holder) return `this instance (${instanceLabel(info)})`;
  return `instance ${shortId(holder)}`;
}
