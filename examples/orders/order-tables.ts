/**
 * The orders example's read side in SQL tables of its own: every order with
 * its status and date (indexed to list the newest orders of a status), and
 * a summary per customer. Handlers write through the batch's transaction
 * (Kysely here), so rows and the checkpoint commit together; the queries
 * `ListOrdersByStatus` and `GetCustomerSummary` read through `ctx.readmodel`,
 * which sees the caller's tenant's rows only. Needs the SQLite or Postgres
 * backend, and `kysely` (npm install kysely).
 */
import { type Event, type Facade, SqlTableReadmodel } from "mneme";
import {
  type CustomerSummary,
  type OrderCancelled,
  OrderCancelledEvt,
  type OrderPlaced,
  OrderPlacedEvt,
  type OrderReadSide,
  type OrderRow,
  OrderShippedEvt,
  type OrderStatus,
  PaymentChargedEvt,
  PaymentRequestedEvt,
} from "./orders-domain.js";

/** The tables, as Kysely sees them. */
interface OrderDb {
  orders: {
    tenant_uuid: string;
    order_uuid: string;
    customer: string;
    sku: string;
    quantity: number;
    amount: number;
    status: OrderStatus;
    placed_at: number;
  };
  customer_summary: { tenant_uuid: string; customer: string; orders: number; amount: number; shipped: number; cancelled: number };
}

export class OrderTables extends SqlTableReadmodel<OrderDb> implements OrderReadSide {
  constructor(facade: Facade) {
    super(facade, {
      tables: { orders: {}, customer_summary: {} },
      // One generation's tables; `t` names them (a restore from zero builds the next beside the served one).
      ddl: (t) => [
        `CREATE TABLE ${t("orders")} (
           tenant_uuid TEXT NOT NULL, order_uuid TEXT NOT NULL, customer TEXT NOT NULL, sku TEXT NOT NULL,
           quantity INTEGER NOT NULL, amount NUMERIC NOT NULL, status TEXT NOT NULL, placed_at BIGINT NOT NULL,
           PRIMARY KEY (tenant_uuid, order_uuid))`,
        `CREATE INDEX ${t.id("orders_by_status")} ON ${t("orders")} (tenant_uuid, status, placed_at)`,
        `CREATE TABLE ${t("customer_summary")} (
           tenant_uuid TEXT NOT NULL, customer TEXT NOT NULL, orders INTEGER NOT NULL, amount NUMERIC NOT NULL,
           shipped INTEGER NOT NULL, cancelled INTEGER NOT NULL, PRIMARY KEY (tenant_uuid, customer))`,
      ],
    });
    this.domain = "Orders";
    this.name = "OrderTables";
    this.addDomainEventHandler(OrderPlacedEvt, (_ctx, e, p) => this.#placed(e, p));
    this.addDomainEventHandler(PaymentRequestedEvt, (_ctx, e) => this.#status(e, "awaiting-payment"));
    this.addDomainEventHandler(PaymentChargedEvt, (_ctx, e) => this.#status(e, "paid"));
    this.addDomainEventHandler(OrderShippedEvt, async (_ctx, e) => {
      await this.#status(e, "shipped");
      await this.#count(e, "shipped");
    });
    this.addDomainEventHandler(OrderCancelledEvt, async (_ctx, e: Event<OrderCancelled>) => {
      await this.#status(e, "cancelled");
      await this.#count(e, "cancelled");
    });
  }

  async #placed(e: Event<OrderPlaced>, p: OrderPlaced): Promise<void> {
    const customer = p.customer ?? e.reqCtx?.senderAccountUuid ?? "unknown";
    // insert/upsert fill tenant_uuid with the event's tenant.
    await this.sql.insert("orders", {
      order_uuid: e.aggregateUuid,
      customer,
      sku: p.sku,
      quantity: p.quantity,
      amount: p.amount,
      status: "placed",
      placed_at: Math.floor(e.createdAt / 1e6),
    });
    await this.sql.upsert(
      "customer_summary",
      { customer, orders: 1, amount: p.amount, shipped: 0, cancelled: 0 },
      { key: ["customer"], add: ["orders", "amount"] },
    );
  }

  async #status(e: Event, status: OrderStatus): Promise<void> {
    await this.sql.kysely
      .updateTable("orders")
      .set({ status })
      .where("tenant_uuid", "=", e.tenantUuid)
      .where("order_uuid", "=", e.aggregateUuid)
      .execute();
  }

  async #count(e: Event, column: "shipped" | "cancelled"): Promise<void> {
    const db = this.sql.kysely;
    await db
      .updateTable("customer_summary")
      .set((eb) => ({ [column]: eb(column, "+", 1) }))
      .where("tenant_uuid", "=", e.tenantUuid)
      .where("customer", "=", (eb) =>
        eb.selectFrom("orders").select("customer").where("tenant_uuid", "=", e.tenantUuid).where("order_uuid", "=", e.aggregateUuid),
      )
      .execute();
  }

  /** The newest orders of a status (the index on tenant, status, date serves it). */
  async byStatus(status: OrderStatus, limit: number): Promise<OrderRow[]> {
    const rows = await this.sql.reader
      .selectFrom("orders")
      .selectAll()
      .where("status", "=", status)
      .orderBy("placed_at", "desc")
      .orderBy("order_uuid", "desc")
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      orderUuid: r.order_uuid,
      customer: r.customer,
      sku: r.sku,
      quantity: Number(r.quantity),
      amount: Number(r.amount),
      status: r.status,
      placedAt: Number(r.placed_at),
    }));
  }

  async customerSummary(customer: string): Promise<CustomerSummary | undefined> {
    const r = await this.sql.reader.selectFrom("customer_summary").selectAll().where("customer", "=", customer).executeTakeFirst();
    if (r === undefined) return undefined;
    return {
      customer: r.customer,
      orders: Number(r.orders),
      amount: Number(r.amount),
      shipped: Number(r.shipped),
      cancelled: Number(r.cancelled),
    };
  }
}

/** Registers the read side (the Orders domain must be registered: installOrders does it). */
export function installOrderTables(facade: Facade): OrderTables {
  const tables = new OrderTables(facade);
  facade.registerReadmodel(tables);
  return tables;
}
