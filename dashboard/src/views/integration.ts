/**
 * The handlers that link the application to a message broker: publishers of
 * integration events and consumers of messages, whatever the broker (mneme/nats,
 * mneme/amqp), from the `integration` field of the Runtime's handler list.
 */
import { h } from "../dom.js";
import { num } from "../format.js";
import type { EventHandlerInfo, IntegrationInfo } from "../types.js";
import { badge, card, table } from "../ui.js";

/** A card listing the publishers and consumers among `handlers`; null when there are none. */
export function integrationPanel(handlers: readonly EventHandlerInfo[]): HTMLElement | null {
  const linked = handlers.filter((x): x is EventHandlerInfo & { integration: IntegrationInfo } => x.integration !== undefined);
  if (linked.length === 0) return null;
  return card(
    "Integration",
    table(
      ["Handler", "Kind", "Broker", "Connection", "Lag", "Handled", "Dead letters", "Last error"],
      linked.map((x) => integrationRow(x.eventHandlerName, x.integration)),
      { class: "integration" },
    ),
    h(
      "p",
      { class: "hint" },
      "Lag: a publisher's events still in its outbox; a consumer's messages waiting on the broker. Handled and failed attempts count since this instance started.",
    ),
  );
}

function integrationRow(name: string, i: IntegrationInfo): HTMLTableRowElement {
  return h(
    "tr",
    { "data-integration": name, "data-role": i.role, "data-connected": String(i.connected) },
    h("td", { class: "handler" }, h("div", { class: "name" }, name), h("div", { class: "sub" }, i.target)),
    h("td", { "data-label": "Kind" }, badge(i.role, "violet")),
    h("td", { "data-label": "Broker" }, i.broker),
    h("td", { "data-label": "Connection" }, i.connected ? badge("connected", "ok") : badge("disconnected", "bad")),
    h("td", { class: `num ${i.lag > 0 ? "warn-text" : ""}`, "data-label": "Lag" }, i.lag < 0 ? "–" : num(i.lag)),
    h(
      "td",
      { class: "num", "data-label": "Handled" },
      num(i.handled),
      i.failures > 0 ? h("div", { class: "error-text" }, `${num(i.failures)} failed`) : null,
    ),
    h("td", { class: `num ${i.deadLetters > 0 ? "error-text" : ""}`, "data-label": "Dead letters" }, num(i.deadLetters)),
    h("td", { "data-label": "Last error" }, i.lastError === undefined ? "–" : h("span", { class: "error-text" }, i.lastError)),
  );
}
