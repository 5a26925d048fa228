/**
 * The orders example's domains: an order (placed, payment requested and
 * charged, shipped or cancelled, all on the order's aggregate, so that a
 * late payment and a payment timeout meet in one optimistic-concurrency
 * check) and the stock of an article (reserved and released per order).
 * Commands refuse nothing that a retry could mend with an error: a step that
 * no longer applies (shipping a cancelled order, cancelling a paid one)
 * appends nothing, so the chain's commands can be sent again safely.
 */
import { anonymous, defineDomain, type DomainInstaller, MnemeError, on } from "mneme";
import type { EventHandler } from "mneme/reactions";

export interface PlaceOrder {
  orderUuid: string;
  sku: string;
  quantity: number;
  amount: number;
  /** Who ordered (the read side's per-customer summary); default: the sender's account. */
  customer?: string;
}
export interface OrderRef {
  orderUuid: string;
}
export interface CancelOrder {
  orderUuid: string;
  reason: string;
}
export interface RecordPayment {
  orderUuid: string;
  chargeId: string;
}
export interface AddStock {
  sku: string;
  quantity: number;
}
export interface StockRequest {
  sku: string;
  orderUuid: string;
  quantity: number;
}

export type OrderPlaced = PlaceOrder;
export interface PaymentRequested {
  orderUuid: string;
  amount: number;
}
export interface PaymentCharged {
  orderUuid: string;
  chargeId: string;
}
export type OrderShipped = OrderRef;
export type OrderCancelled = CancelOrder;
export interface StockAdded {
  sku: string;
  quantity: number;
}
export type StockReserved = StockRequest;
export type StockUnavailable = StockRequest;
export type StockReleased = StockRequest;

export type OrderStatus = "none" | "placed" | "awaiting-payment" | "paid" | "shipped" | "cancelled";
export interface OrderState {
  status: OrderStatus;
  amount: number;
}
export interface StockState {
  available: number;
  /** Reserved quantity by order. */
  reserved: Record<string, number>;
}

// Anonymous keeps the example short; a real shop would use its own permissions.
const open = { permission: anonymous };

export const Orders = defineDomain("Orders", { description: "Orders, their payment and shipping" });
export const PlaceOrderCmd = Orders.command<PlaceOrder>("PlaceOrder", open);
export const RequestPaymentCmd = Orders.command<OrderRef>("RequestPayment", open);
export const RecordPaymentCmd = Orders.command<RecordPayment>("RecordPayment", open);
export const ShipOrderCmd = Orders.command<OrderRef>("ShipOrder", open);
export const CancelOrderCmd = Orders.command<CancelOrder>("CancelOrder", open);
export const OrderPlacedEvt = Orders.event<OrderPlaced>("OrderPlaced");
export const PaymentRequestedEvt = Orders.event<PaymentRequested>("PaymentRequested");
export const PaymentChargedEvt = Orders.event<PaymentCharged>("PaymentCharged");
export const OrderShippedEvt = Orders.event<OrderShipped>("OrderShipped");
export const OrderCancelledEvt = Orders.event<OrderCancelled>("OrderCancelled");

export const Order = Orders.aggregate<OrderState>("Order", {
  initialState: () => ({ status: "none", amount: 0 }),
  evolve: [
    on(OrderPlacedEvt, (_s, p) => ({ status: "placed", amount: p.amount })),
    on(PaymentRequestedEvt, (s) => ({ ...s, status: "awaiting-payment" })),
    on(PaymentChargedEvt, (s) => ({ ...s, status: "paid" })),
    on(OrderShippedEvt, (s) => ({ ...s, status: "shipped" })),
    on(OrderCancelledEvt, (s) => ({ ...s, status: "cancelled" })),
  ],
});

/** One order as the read side lists it (examples/orders/order-tables.ts). */
export interface OrderRow {
  orderUuid: string;
  customer: string;
  sku: string;
  quantity: number;
  amount: number;
  status: OrderStatus;
  /** ms since the epoch. */
  placedAt: number;
}
/** What one customer ordered, and how it went. */
export interface CustomerSummary {
  customer: string;
  orders: number;
  amount: number;
  shipped: number;
  cancelled: number;
}
/** The read side the queries use (OrderTables, registered by `installOrderTables`). */
export interface OrderReadSide extends EventHandler {
  byStatus(status: OrderStatus, limit: number): Promise<OrderRow[]>;
  customerSummary(customer: string): Promise<CustomerSummary | undefined>;
}

export const ListOrdersByStatus = Orders.query<{ status: OrderStatus; limit?: number }, { orders: OrderRow[] }>("ListOrdersByStatus", open);
export const GetCustomerSummary = Orders.query<{ customer: string }, { summary: CustomerSummary | null }>("GetCustomerSummary", open);

/** The Orders domain's install step: `facade.registerDomain(Orders, installOrdersDomain)`. */
export function installOrdersDomain(d: DomainInstaller): void {
  d.handleCommand(PlaceOrderCmd, async (ctx, _c, p) => {
    if (!Number.isInteger(p.quantity) || p.quantity < 1) throw new MnemeError("VALIDATION_FAILED", "quantity must be an integer >= 1");
    const order = await ctx.aggregates.load(Order, p.orderUuid);
    if (order.state.status !== "none") throw new MnemeError("CONFLICT", `order ${p.orderUuid} exists`);
    return [OrderPlacedEvt.create(p.orderUuid, p)];
  });
  d.handleQuery(ListOrdersByStatus, async (ctx, _q, p) => ({
    orders: await ctx.readmodel<OrderReadSide>("OrderTables").byStatus(p.status, Math.min(p.limit ?? 50, 500)),
  }));
  d.handleQuery(GetCustomerSummary, async (ctx, _q, p) => ({
    summary: (await ctx.readmodel<OrderReadSide>("OrderTables").customerSummary(p.customer)) ?? null,
  }));
  d.handleCommand(RequestPaymentCmd, async (ctx, _c, p) => {
    const order = await ctx.aggregates.load(Order, p.orderUuid);
    if (order.state.status !== "placed") return [];
    return [PaymentRequestedEvt.create(p.orderUuid, { orderUuid: p.orderUuid, amount: order.state.amount })];
  });
  d.handleCommand(RecordPaymentCmd, async (ctx, _c, p) => {
    const order = await ctx.aggregates.load(Order, p.orderUuid);
    // Cancelled meanwhile (the payment timed out): the charge is not booked (a real shop would refund it here).
    if (order.state.status !== "awaiting-payment") return [];
    return [PaymentChargedEvt.create(p.orderUuid, p)];
  });
  d.handleCommand(ShipOrderCmd, async (ctx, _c, p) => {
    const order = await ctx.aggregates.load(Order, p.orderUuid);
    if (order.state.status !== "paid") return [];
    return [OrderShippedEvt.create(p.orderUuid, p)];
  });
  d.handleCommand(CancelOrderCmd, async (ctx, _c, p) => {
    const order = await ctx.aggregates.load(Order, p.orderUuid);
    if (order.state.status !== "placed" && order.state.status !== "awaiting-payment") return []; // paid or over already
    return [OrderCancelledEvt.create(p.orderUuid, p)];
  });
}

export const Inventory = defineDomain("Inventory", { description: "Stock of articles, reserved per order" });
export const AddStockCmd = Inventory.command<AddStock>("AddStock", open);
export const ReserveStockCmd = Inventory.command<StockRequest>("ReserveStock", open);
export const ReleaseStockCmd = Inventory.command<StockRequest>("ReleaseStock", open);
export const StockAddedEvt = Inventory.event<StockAdded>("StockAdded");
export const StockReservedEvt = Inventory.event<StockReserved>("StockReserved");
export const StockUnavailableEvt = Inventory.event<StockUnavailable>("StockUnavailable");
export const StockReleasedEvt = Inventory.event<StockReleased>("StockReleased");

export const Stock = Inventory.aggregate<StockState>("Stock", {
  initialState: () => ({ available: 0, reserved: {} }),
  evolve: [
    on(StockAddedEvt, (s, p) => ({ ...s, available: s.available + p.quantity })),
    on(StockReservedEvt, (s, p) => ({ available: s.available - p.quantity, reserved: { ...s.reserved, [p.orderUuid]: p.quantity } })),
    on(StockReleasedEvt, (s, p) => {
      const { [p.orderUuid]: _released, ...reserved } = s.reserved;
      return { available: s.available + p.quantity, reserved };
    }),
  ],
});

/** The Inventory domain's install step: `facade.registerDomain(Inventory, installInventoryDomain)`. */
export function installInventoryDomain(d: DomainInstaller): void {
  d.handleCommand(AddStockCmd, async (ctx, _c, p) => {
    if (!Number.isInteger(p.quantity) || p.quantity < 1) throw new MnemeError("VALIDATION_FAILED", "quantity must be an integer >= 1");
    await ctx.aggregates.load(Stock, p.sku);
    return [StockAddedEvt.create(p.sku, p)];
  });
  d.handleCommand(ReserveStockCmd, async (ctx, _c, p) => {
    const stock = await ctx.aggregates.load(Stock, p.sku);
    if (stock.state.reserved[p.orderUuid] !== undefined) return []; // reserved already
    if (stock.state.available < p.quantity) return [StockUnavailableEvt.create(p.sku, p)];
    return [StockReservedEvt.create(p.sku, p)];
  });
  d.handleCommand(ReleaseStockCmd, async (ctx, _c, p) => {
    const stock = await ctx.aggregates.load(Stock, p.sku);
    const quantity = stock.state.reserved[p.orderUuid];
    if (quantity === undefined) return []; // nothing reserved, or released already
    return [StockReleasedEvt.create(p.sku, { ...p, quantity })];
  });
}
