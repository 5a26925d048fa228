/** Dead letters of the process managers and reactors: what failed its last attempt, with Retry and Discard. */
import { h } from "../dom.js";
import { ago } from "../format.js";
import type { DeadLetterEntry } from "../types.js";
import { badge, tenantLabel } from "../ui.js";
import { outboxListView } from "./outbox-list.js";
import type { View, ViewContext } from "./view.js";

export function deadLettersView(ctx: ViewContext): View {
  const control = (action: "retry" | "discard") => (e: DeadLetterEntry) =>
    ctx.api.command("Runtime", "ControlDeadLetter", { action, id: e.id, eventHandlerName: e.eventHandlerName });
  return outboxListView<DeadLetterEntry>(ctx, {
    view: "dead-letters",
    query: "ListDeadLetters",
    key: (e) => e.id,
    columns: [
      {
        title: "Handler",
        cell: (e) => [h("div", { class: "name" }, e.eventHandlerName), h("div", { class: "sub" }, `from ${e.eventPath}`)],
      },
      {
        title: "What",
        cell: (e) => [badge(e.kind === "command" ? (e.scheduled ? "scheduled command" : "command") : "effect", "info"), " ", e.target],
      },
      { title: "Attempts", cell: (e) => String(e.attempts), num: true },
      { title: "Last attempt", cell: (e) => (e.lastAttemptAt === undefined ? "–" : ago(e.lastAttemptAt * 1e6)) },
      { title: "Last error", cell: (e) => h("div", { class: "error-text" }, e.lastError ?? "–") },
      { title: "Tenant", cell: (e) => tenantLabel(ctx.app.tenantName(e.tenantUuid), e.tenantUuid) },
    ],
    actions: [
      { id: "retry", label: "Retry", run: control("retry"), done: "Retried: pending again, attempts from zero" },
      { id: "discard", label: "Discard", confirm: "Confirm: discard", run: control("discard"), done: "Discarded" },
    ],
    pageSize: 20,
    groupBy: [
      { id: "handler", label: "handler", key: (e) => e.eventHandlerName },
      { id: "error", label: "error", key: (e) => firstLine(e.lastError) },
      { id: "handler-error", label: "handler and error", key: (e) => `${e.eventHandlerName}: ${firstLine(e.lastError)}` },
    ],
    emptyText: "No dead letters: every dispatch and effect of the process managers and reactors went through.",
    hint: "An entry is dead after its handler's maxAttempts failures. Retry makes it pending again with its attempts reset; Discard deletes it. Both need an administrator. Tick entries, a page or a group to retry or discard them together (one command each).",
  });
}

/** An error's first line, as a grouping key (the same failure with another detail on later lines groups together). */
function firstLine(error: string | undefined): string {
  return (error ?? "no error recorded").split("\n")[0]!.slice(0, 200);
}
