/** Scheduled commands of the process managers that have not fired, due first, with Cancel. */
import { h } from "../dom.js";
import { duration } from "../format.js";
import type { ScheduledCommandEntry } from "../types.js";
import { jsonBlock, tenantLabel } from "../ui.js";
import { outboxListView } from "./outbox-list.js";
import type { View, ViewContext } from "./view.js";

export function scheduledView(ctx: ViewContext): View {
  return outboxListView<ScheduledCommandEntry>(ctx, {
    view: "scheduled",
    query: "ListScheduledCommands",
    key: (e) => e.commandUuid,
    columns: [
      {
        title: "Command",
        cell: (e) => [h("div", { class: "name" }, `${e.domain}.${e.name}`), h("div", { class: "sub" }, `by ${e.eventHandlerName}`)],
      },
      { title: "Due", cell: (e) => [h("div", null, new Date(e.dueAt).toLocaleString()), h("div", { class: "sub" }, due(e.dueAt))] },
      { title: "Attempts", cell: (e) => String(e.attempts), num: true },
      { title: "Payload", cell: (e) => h("details", null, h("summary", null, "JSON"), jsonBlock(e.payload)) },
      { title: "Tenant", cell: (e) => tenantLabel(ctx.app.tenantName(e.tenantUuid), e.tenantUuid) },
    ],
    actions: [
      {
        id: "cancel",
        label: "Cancel",
        confirm: "Confirm: cancel",
        run: (e) =>
          ctx.api.command("Runtime", "CancelScheduledCommand", { commandUuid: e.commandUuid, eventHandlerName: e.eventHandlerName }),
        done: "Cancelled",
      },
    ],
    emptyText: "No scheduled commands are waiting.",
    hint: "Commands a process manager scheduled with ctx.schedule that have not fired yet. Cancel needs an administrator.",
  });
}

function due(atMs: number): string {
  const ms = atMs - Date.now();
  return ms <= 0 ? "due now" : `in ${duration(ms)}`;
}
