/**
 * The orders example's reactions: the Fulfilment process manager (place
 * order -> reserve stock -> request payment, with a payment timeout ->
 * ship; on a cancellation, release the stock) and the PaymentGateway
 * reactor, which charges an external payment provider at least once with a
 * stable idempotency key and books the charge with a command.
 */
import type { Facade } from "mneme";
import { correlationOf, ProcessManager, Reactor, type RetryPolicy } from "mneme/reactions";
import {
  CancelOrderCmd,
  installInventoryDomain,
  installOrdersDomain,
  Inventory,
  OrderCancelledEvt,
  OrderPlacedEvt,
  Orders,
  OrderShippedEvt,
  PaymentChargedEvt,
  PaymentRequestedEvt,
  RecordPaymentCmd,
  ReleaseStockCmd,
  RequestPaymentCmd,
  ReserveStockCmd,
  ShipOrderCmd,
  StockReleasedEvt,
  StockReservedEvt,
  StockUnavailableEvt,
} from "./orders-domain.js";

/** Where a fulfilment stands, per order. */
export interface FulfilmentState {
  step: "reserving" | "paying" | "shipping" | "releasing";
  sku: string;
  quantity: number;
  reserved: boolean;
  /** The commandUuid of the pending payment timeout. */
  timeout?: string;
}

/** The external payment provider: charges once per idempotency key (a provider that keeps its promise). */
export interface PaymentProvider {
  charge(request: { orderUuid: string; amount: number; idempotencyKey: string }): Promise<{ chargeId: string }>;
}

export interface OrdersOptions {
  readonly provider: PaymentProvider;
  /** How long an order waits for its payment before it is cancelled. */
  readonly paymentTimeoutMs: number;
  readonly clock?: () => number;
  readonly pollMs?: number;
  readonly retry?: Partial<RetryPolicy>;
}

const byOrder = (e: { payload: unknown }): string => (e.payload as { orderUuid: string }).orderUuid;

/** The Fulfilment process manager: one process per order. */
export function fulfilment(facade: Facade, o: OrdersOptions): ProcessManager<FulfilmentState> {
  const options = {
    name: "Fulfilment",
    domain: "Orders",
    initialState: (): FulfilmentState => ({ step: "reserving", sku: "", quantity: 0, reserved: false }),
    correlate: byOrder,
    ...(o.clock === undefined ? {} : { clock: o.clock }),
    ...(o.pollMs === undefined ? {} : { pollMs: o.pollMs }),
    ...(o.retry === undefined ? {} : { retry: o.retry }),
  };
  return new ProcessManager<FulfilmentState>(facade, options)
    .on(OrderPlacedEvt, (ctx, s, p) => {
      ctx.dispatch(ReserveStockCmd, { sku: p.sku, orderUuid: p.orderUuid, quantity: p.quantity });
      return { ...s, step: "reserving", sku: p.sku, quantity: p.quantity };
    })
    .on(StockReservedEvt, (ctx, s, p, e) => {
      ctx.dispatch(RequestPaymentCmd, { orderUuid: p.orderUuid });
      // The deadline counts from the event, not from when it is handled: a replay or a late handler computes the same.
      const timeout = ctx.schedule(
        CancelOrderCmd,
        { orderUuid: p.orderUuid, reason: "payment timeout" },
        { at: e.createdAt / 1e6 + o.paymentTimeoutMs },
      );
      return { ...s, step: "paying", reserved: true, timeout };
    })
    .on(StockUnavailableEvt, (ctx, s, p) => {
      ctx.dispatch(CancelOrderCmd, { orderUuid: p.orderUuid, reason: "out of stock" });
      return s;
    })
    .on(PaymentChargedEvt, (ctx, s, p) => {
      if (s.timeout !== undefined) ctx.cancelScheduled(s.timeout);
      ctx.dispatch(ShipOrderCmd, { orderUuid: p.orderUuid });
      const { timeout: _t, ...rest } = s;
      return { ...rest, step: "shipping" };
    })
    .on(OrderShippedEvt, (ctx) => {
      ctx.complete();
      return undefined;
    })
    .on(OrderCancelledEvt, (ctx, s, p) => {
      if (!s.reserved) {
        ctx.complete();
        return undefined;
      }
      // The compensating step: give the reserved stock back.
      ctx.dispatch(ReleaseStockCmd, { sku: s.sku, orderUuid: p.orderUuid, quantity: s.quantity });
      return { ...s, step: "releasing" };
    })
    .on(StockReleasedEvt, (ctx) => {
      ctx.complete();
      return undefined;
    });
}

/** The PaymentGateway reactor: charges the provider, then books the charge. */
export function paymentGateway(facade: Facade, o: OrdersOptions): Reactor {
  const options = {
    name: "PaymentGateway",
    domain: "Orders",
    ...(o.clock === undefined ? {} : { clock: o.clock }),
    ...(o.pollMs === undefined ? {} : { pollMs: o.pollMs }),
    ...(o.retry === undefined ? {} : { retry: o.retry }),
  };
  return new Reactor(facade, options).on(PaymentRequestedEvt, async (e, { dedupeKey }) => {
    const { chargeId } = await o.provider.charge({ orderUuid: e.payload.orderUuid, amount: e.payload.amount, idempotencyKey: dedupeKey });
    // The dedupe key is a uuid: as the commandUuid it makes the booking idempotent too.
    const reqCtx = { ...e.reqCtx, correlationId: correlationOf(e), causationId: e.eventUuid };
    await facade.dispatch(RecordPaymentCmd, { orderUuid: e.payload.orderUuid, chargeId }, { reqCtx, commandUuid: dedupeKey });
  });
}

/** Registers the example's domains and reactions with `facade` (before or after start). */
export function installOrders(facade: Facade, o: OrdersOptions): { fulfilment: ProcessManager<FulfilmentState>; gateway: Reactor } {
  facade.registerDomain(Orders, installOrdersDomain);
  facade.registerDomain(Inventory, installInventoryDomain);
  const pm = fulfilment(facade, o);
  const gateway = paymentGateway(facade, o);
  facade.registerReadmodel(pm);
  facade.registerReadmodel(gateway);
  return { fulfilment: pm, gateway };
}
