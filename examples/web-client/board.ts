/**
 * The Board domain of the web-client example: tickets opened and closed in a
 * tenant, a readmodel of the open ones per tenant, and a live query over it
 * that the page subscribes to.
 */
import { BaseReadmodel, type DomainInstaller, type Facade, MnemeError, defineDomain } from "mneme";

export interface OpenTicket {
  ticketUuid: string;
  title: string;
}
export interface CloseTicket {
  ticketUuid: string;
}

/** One open ticket, as the live query lists it. */
export interface OpenTicketItem {
  ticketUuid: string;
  title: string;
  /** When it was opened: the event's createdAt, in nanoseconds since the epoch. */
  openedAt: number;
}

export const Board = defineDomain("Board", { description: "A tenant's ticket board" });

const uuid = { type: "string", format: "uuid" };

export const OpenTicket = Board.command<OpenTicket>("OpenTicket", {
  description: "Open a ticket",
  schema: {
    type: "object",
    properties: { ticketUuid: uuid, title: { type: "string", minLength: 1, maxLength: 200 } },
    required: ["ticketUuid", "title"],
    additionalProperties: false,
  },
});
export const CloseTicket = Board.command<CloseTicket>("CloseTicket", {
  description: "Close a ticket",
  schema: { type: "object", properties: { ticketUuid: uuid }, required: ["ticketUuid"], additionalProperties: false },
});

export const TicketOpened = Board.event<{ title: string }>("TicketOpened");
export const TicketClosed = Board.event<Record<string, never>>("TicketClosed");

export const TicketAggregate = Board.aggregate("Ticket", {
  initialState: (): { status: "none" | "open" | "closed" } => ({ status: "none" }),
  evolve: (on) => [on(TicketOpened, () => ({ status: "open" as const })), on(TicketClosed, () => ({ status: "closed" as const }))],
});

/**
 * The open tickets of the sender's tenant, oldest first. Live: the page
 * subscribes to it, and every subscriber of a tenant shares one evaluation
 * per batch the OpenTickets readmodel commits.
 */
export const ListOpenTickets = Board.query<Record<string, never>, { tickets: OpenTicketItem[] }>("ListOpenTickets", {
  description: "The open tickets of the sender's tenant, oldest first",
  schema: { type: "object", properties: {}, additionalProperties: false },
  resultSchema: {
    type: "object",
    properties: {
      tickets: {
        type: "array",
        items: {
          type: "object",
          properties: { ticketUuid: { type: "string" }, title: { type: "string" }, openedAt: { type: "number" } },
          required: ["ticketUuid", "title", "openedAt"],
        },
      },
    },
    required: ["tickets"],
  },
  live: { share: "tenant", readmodels: ["OpenTickets"] },
});

interface TenantBoard {
  tenantUuid: string;
  open: OpenTicketItem[];
}

/** The open tickets of each tenant: one document per tenant (a board holds its open tickets only). */
export class OpenTickets extends BaseReadmodel {
  constructor(facade: Facade) {
    super(facade);
    this.domain = "Board";
    this.name = "OpenTickets";
    this.addDomainEventHandler(TicketOpened, (_ctx, e) =>
      this.#change(e.tenantUuid, (open) => [...open, { ticketUuid: e.aggregateUuid, title: e.payload.title, openedAt: e.createdAt }]),
    );
    this.addDomainEventHandler(TicketClosed, (_ctx, e) =>
      this.#change(e.tenantUuid, (open) => open.filter((t) => t.ticketUuid !== e.aggregateUuid)),
    );
  }

  async #change(tenantUuid: string | undefined, change: (open: OpenTicketItem[]) => OpenTicketItem[]): Promise<void> {
    if (tenantUuid === undefined) return; // tickets are always opened in a tenant
    const boards = this.collection<TenantBoard>("boards");
    const board = await boards.get(tenantUuid);
    await boards.put(tenantUuid, { tenantUuid, open: change(board?.open ?? []) });
  }

  /** What a handler gets from `ctx.readmodel(openTickets)`: its own tenant's board only. */
  forTenant(tenantUuid: string): { list(): Promise<OpenTicketItem[]> } {
    return { list: async () => (await this.collection<TenantBoard>("boards").get(tenantUuid))?.open ?? [] };
  }
}

/** Installs the domain and its readmodel on a facade. */
export function registerBoard(facade: Facade): OpenTickets {
  const openTickets = new OpenTickets(facade);
  facade.registerDomain(Board, (d) => installBoard(d, openTickets));
  facade.registerReadmodel(openTickets);
  return openTickets;
}

function installBoard(d: DomainInstaller, openTickets: OpenTickets): void {
  d.handleCommand(OpenTicket, async (ctx, _cmd, p) => {
    const t = await ctx.aggregates.load(TicketAggregate, p.ticketUuid);
    if (t.state.status !== "none") throw new MnemeError("CONFLICT", `ticket ${p.ticketUuid} exists already`);
    return [TicketOpened.create(p.ticketUuid, { title: p.title })];
  });
  d.handleCommand(CloseTicket, async (ctx, _cmd, p) => {
    const t = await ctx.aggregates.load(TicketAggregate, p.ticketUuid);
    if (t.state.status === "none") throw new MnemeError("NOT_FOUND", `ticket ${p.ticketUuid} does not exist`);
    return t.state.status === "closed" ? [] : [TicketClosed.create(p.ticketUuid, {})];
  });
  d.handleQuery(ListOpenTickets, async (ctx) => ({ tickets: await ctx.readmodel(openTickets).list() }));
}
