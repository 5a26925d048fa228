/**
 * The orders example's Restock process manager: when an order finds no
 * stock, it orders the missing quantity in. It acts as a service principal
 * of its own, allowed AddStock and nothing else, in the tenant of the event
 * it reacts to: not as the buyer whose order ran short (docs/reactions.md,
 * "A service principal").
 */
import type { Facade } from "mneme";
import { ProcessManager, servicePrincipal } from "mneme/reactions";
import { AddStockCmd, StockUnavailableEvt } from "./orders-domain.js";

/** The service the restocking runs as: it may send AddStock only. */
export const restocking = servicePrincipal({ name: "orders.restock", commands: [AddStockCmd] });

/** The Restock process manager: one process per article. */
export function restock(facade: Facade): ProcessManager<{ ordered: number }> {
  return new ProcessManager<{ ordered: number }>(facade, {
    name: "Restock",
    domain: "Inventory",
    service: restocking,
    initialState: () => ({ ordered: 0 }),
    correlate: (e) => e.aggregateUuid,
  }).on(StockUnavailableEvt, (ctx, s, p) => {
    ctx.dispatch(AddStockCmd, { sku: p.sku, quantity: p.quantity });
    return { ordered: s.ordered + p.quantity };
  });
}
