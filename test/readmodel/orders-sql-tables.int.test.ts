/**
 * The orders example's read side in SQL tables (examples/orders/order-tables.ts),
 * on a SQLite file and a Postgres schema: orders listed by status, newest
 * first, and a summary per customer, through query handlers that see the
 * caller's tenant only; a restore from zero answers the same.
 */
import { describe, expect, it } from "vitest";
import { createFacade, type Facade, type FacadeOptions } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";
import { installOrderTables, type OrderTables } from "../../examples/orders/order-tables.js";
import {
  CancelOrderCmd,
  GetCustomerSummary,
  installInventoryDomain,
  installOrdersDomain,
  Inventory,
  ListOrdersByStatus,
  Orders,
  PlaceOrderCmd,
  RecordPaymentCmd,
  RequestPaymentCmd,
  ShipOrderCmd,
} from "../../examples/orders/orders-domain.js";
import { postgresScratch } from "../support/postgres-scratch.js";
import { alice, bob } from "../support/shared-places.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const pg = postgresScratch("mneme_ordertables");
const files = sqliteScratch("ordertables");

const places: [string, () => Partial<FacadeOptions>][] = [
  ["sqlite", () => createSqliteBackends({ filename: files.newFile() })],
  ["postgres", () => createPostgresBackends({ pool: pg.newPool(4), schema: pg.newSchema() })],
];

describe.each(places)("orders example: the read side in SQL tables on %s", (_name, backends) => {
  it("lists orders by status, newest first, and sums them per customer, per tenant; a restore from zero answers the same", async () => {
    const f: Facade = files.keep(createFacade({ appName: "shop", ...backends() }));
    f.registerDomain(Orders, installOrdersDomain);
    f.registerDomain(Inventory, installInventoryDomain);
    const tables: OrderTables = installOrderTables(f);
    await f.start();
    const place = async (orderUuid: string, customer: string, amount: number, reqCtx = alice) =>
      f.dispatch(PlaceOrderCmd, { orderUuid, sku: "book", quantity: 1, amount, customer }, { reqCtx, waitToFinish: true });
    const wait = { reqCtx: alice, waitToFinish: true };
    await place("o1", "ann", 10);
    await place("o2", "ann", 20);
    await place("o3", "ben", 5);
    await place("o4", "ann", 7);
    await place("x1", "ann", 1000, bob);
    // o1 ships, o3 is cancelled, o4 awaits payment, o2 stays placed.
    await f.dispatch(RequestPaymentCmd, { orderUuid: "o1" }, wait);
    await f.dispatch(RecordPaymentCmd, { orderUuid: "o1", chargeId: "ch1" }, wait);
    await f.dispatch(ShipOrderCmd, { orderUuid: "o1" }, wait);
    await f.dispatch(CancelOrderCmd, { orderUuid: "o3", reason: "changed mind" }, wait);
    await f.dispatch(RequestPaymentCmd, { orderUuid: "o4" }, wait);

    const byStatus = async (status: "placed" | "shipped" | "cancelled" | "awaiting-payment", reqCtx = alice) =>
      (await f.query(ListOrdersByStatus, { status }, { reqCtx })).orders.map((o) => `${o.orderUuid}:${o.customer}:${o.amount}`);
    const answers = async () => ({
      placed: await byStatus("placed"),
      shipped: await byStatus("shipped"),
      cancelled: await byStatus("cancelled"),
      awaiting: await byStatus("awaiting-payment"),
      ann: (await f.query(GetCustomerSummary, { customer: "ann" }, { reqCtx: alice })).summary,
      ben: (await f.query(GetCustomerSummary, { customer: "ben" }, { reqCtx: alice })).summary,
      bobPlaced: await byStatus("placed", bob),
      bobAnn: (await f.query(GetCustomerSummary, { customer: "ann" }, { reqCtx: bob })).summary,
    });
    const expected = {
      placed: ["o2:ann:20"],
      shipped: ["o1:ann:10"],
      cancelled: ["o3:ben:5"],
      awaiting: ["o4:ann:7"],
      ann: { customer: "ann", orders: 3, amount: 37, shipped: 1, cancelled: 0 },
      ben: { customer: "ben", orders: 1, amount: 5, shipped: 0, cancelled: 1 },
      // Another tenant's customer of the same name is another row, unseen by alice's tenant.
      bobPlaced: ["x1:ann:1000"],
      bobAnn: { customer: "ann", orders: 1, amount: 1000, shipped: 0, cancelled: 0 },
    };
    expect(await answers()).toEqual(expected);

    // Newest first: o5 placed after o2.
    await place("o5", "cid", 3);
    expect(await byStatus("placed")).toEqual(["o5:cid:3", "o2:ann:20"]);
    const placedAt = (await f.query(ListOrdersByStatus, { status: "placed" }, { reqCtx: alice })).orders.map((o) => o.placedAt);
    expect(placedAt[0]).toBeGreaterThanOrEqual(placedAt[1]!);

    await tables.restoreState(undefined, { fromZero: true }).done;
    expect(await byStatus("placed")).toEqual(["o5:cid:3", "o2:ann:20"]);
    const again = await answers();
    expect({ ...again, placed: expected.placed }).toEqual(expected);
  });
});
