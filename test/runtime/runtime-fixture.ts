/**
 * Shared fixture of the runtime-*.unit.test.ts files: a small Shop domain, a
 * readmodel whose handler can be held (gate) or made to fail, a plain event
 * handler, and request contexts for an administrator and an ordinary user.
 */
import {
  AllEvents,
  BaseReadmodel,
  type Authorizer,
  type Domain,
  type EventType,
  type Facade,
  type FacadeOptions,
  type RequestContext,
  type SystemEvent,
  createFacade,
  defineDomain,
  anonymous,
  MnemeError,
} from "mneme";
import { BaseEventHandler } from "mneme/reactions";

export const ADMIN: RequestContext = Object.freeze({
  senderAccountUuid: "acc-admin",
  senderSessionUuid: "ses-admin",
  senderIdentityUuid: "idn-admin",
  senderTenantUuid: "tenant-sys",
});
export const USER: RequestContext = Object.freeze({
  senderAccountUuid: "acc-user",
  senderSessionUuid: "ses-user",
  senderIdentityUuid: "idn-user",
  senderTenantUuid: "tenant-a",
});
export const OTHER_TENANT_USER: RequestContext = Object.freeze({ ...USER, senderAccountUuid: "acc-b", senderTenantUuid: "tenant-b" });

/** Grants everything to the administrator account, and only the level-checked permissions (lists, shop) to others. */
export const authorizer: Authorizer = (reqCtx, permission) => {
  if (reqCtx.senderAccountUuid === ADMIN.senderAccountUuid) return undefined;
  if (permission.level === "Authorized") return undefined;
  return new MnemeError("PERMISSION_DENIED", `${reqCtx.senderAccountUuid ?? "anonymous"} may not ${permission.domain}.${permission.type}`);
};

export interface PlaceOrder {
  orderUuid: string;
  item: string;
  qty: number;
}

const S2020 = "https://json-schema.org/draft/2020-12/schema";

/** A fresh Shop domain (plus a Billing domain) per facade: handler maps live on the domain object. */
export function makeDomains(): {
  Shop: Domain;
  Billing: Domain;
  OrderPlaced: EventType<PlaceOrder>;
  OrderCancelled: EventType<{ reason: string }>;
} {
  const Shop = defineDomain("Shop", { description: "Orders" });
  const PlaceOrder = Shop.command<PlaceOrder>("PlaceOrder", {
    description: "Place an order",
    schema: {
      $schema: S2020,
      type: "object",
      additionalProperties: false,
      required: ["orderUuid", "item", "qty"],
      properties: {
        orderUuid: { type: "string", minLength: 1 },
        item: { type: "string", minLength: 1 },
        qty: { type: "integer", minimum: 1 },
      },
    },
  });
  const CancelOrder = Shop.command<{ orderUuid: string; reason: string }>("CancelOrder", {
    description: "Cancel an order",
    permission: (reqCtx) => (reqCtx.senderAccountUuid ? undefined : new Error("only signed-in senders cancel")),
  });
  Shop.command<Record<string, never>>("Archive", { description: "A command without a handler" });
  const Ping = Shop.query<Record<string, never>, string>("Ping", { description: "Liveness", permission: anonymous });
  const CountOrders = Shop.query<Record<string, never>, number>("CountOrders", { description: "Number of orders" });
  const OrderPlaced = Shop.event<PlaceOrder>("OrderPlaced");
  const OrderCancelled = Shop.event<{ reason: string }>("OrderCancelled");
  Shop.handleCommand(PlaceOrder, (_ctx, _cmd, p) => [OrderPlaced.create(p.orderUuid, p)]);
  Shop.handleCommand(CancelOrder, (_ctx, _cmd, p) => [OrderCancelled.create(p.orderUuid, { reason: p.reason })]);
  Shop.handleQuery(Ping, () => "pong");
  Shop.handleQuery(CountOrders, (ctx) => ctx.readmodel<OrderList>("OrderList").count());

  const Billing = defineDomain("Billing", { description: "Invoices" });
  const Invoice = Billing.command<{ orderUuid: string }>("Invoice", { description: "Invoice an order" });
  Billing.event("Invoiced");
  Billing.handleCommand(Invoice, () => []);
  return { Shop, Billing, OrderPlaced, OrderCancelled };
}

/**
 * A readmodel of orders. `hold()` makes its handler wait until `release()`;
 * `failOnItem` makes it throw on an order of that item.
 */
export class OrderList extends BaseReadmodel {
  failOnItem: string | undefined;
  applied: string[] = [];
  #gate: Promise<void> | undefined;
  #open: (() => void) | undefined;
  #entered: (() => void) | undefined;
  entered: Promise<void> = Promise.resolve();

  constructor(facade: Facade, OrderPlaced: EventType<PlaceOrder>, name = "OrderList") {
    super(facade);
    this.domain = "Shop";
    this.name = name;
    this.addDomainEventHandler(OrderPlaced, async (_ctx, event, p) => {
      this.#entered?.();
      if (this.#gate !== undefined) await this.#gate;
      if (p.item === this.failOnItem) throw new Error(`cannot list ${p.item}`);
      this.applied.push(event.aggregateUuid);
      await this.collection<PlaceOrder>("orders").put(event.aggregateUuid, p);
    });
  }

  /** From now on the handler waits in its first call until release(); `entered` resolves when it is waiting. */
  hold(): void {
    this.#gate = new Promise((r) => (this.#open = r));
    this.entered = new Promise((r) => (this.#entered = r));
  }

  release(): void {
    this.#open?.();
    this.#gate = undefined;
    this.#entered = undefined;
  }

  count(): Promise<number> {
    return this.collection("orders").count();
  }
}

/** A plain live handler (not a state restorer): counts every event it sees. */
export class Mailer extends BaseEventHandler {
  seen = 0;
  constructor() {
    super();
    this.domain = "Shop";
    this.name = "Mailer";
    this.addDomainEventHandler(AllEvents, () => {
      this.seen++;
    });
  }
}

export interface Rig {
  facade: Facade;
  orders: OrderList;
  mailer: Mailer;
  domains: ReturnType<typeof makeDomains>;
  /** Every system event published (subscribed right after start when the producer runs). */
  events: SystemEvent[];
  place(orderUuid: string, item?: string, reqCtx?: RequestContext): Promise<void>;
}

/** A started facade with the Shop and Billing domains, OrderList and Mailer, the authorizer, and (by default) system events on. */
export async function startRig(opts: FacadeOptions = {}): Promise<Rig> {
  const facade = createFacade({ appName: "shop", version: "1.2.3", authorizer, systemEvents: true, ...opts });
  const domains = makeDomains();
  facade.registerDomain(domains.Shop).registerDomain(domains.Billing);
  const orders = new OrderList(facade, domains.OrderPlaced);
  const mailer = new Mailer();
  facade.registerReadmodel(orders);
  facade.registerReadmodel(mailer);
  const events: SystemEvent[] = [];
  await facade.start();
  if (facade.runtime.systemEvents.running) facade.runtime.systemEvents.subscribe((e) => void events.push(e), { lastEventId: 0 });
  return {
    facade,
    orders,
    mailer,
    domains,
    events,
    async place(orderUuid, item = "book", reqCtx = USER) {
      await facade.dispatch({ domain: "Shop", name: "PlaceOrder" }, { orderUuid, item, qty: 1 }, { reqCtx, waitToFinish: true });
    },
  };
}

/** The system events of `kind` (optionally of one handler). */
export function ofKind(events: readonly SystemEvent[], kind: SystemEvent["kind"], eventHandlerName?: string): SystemEvent[] {
  return events.filter((e) => e.kind === kind && (eventHandlerName === undefined || e.data.eventHandlerName === eventHandlerName));
}
