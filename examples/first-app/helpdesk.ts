/**
 * The Helpdesk domain of docs/first-app.md: tickets opened and closed by the
 * agents of a tenant, a projection to list them, and an SLA timer (a process
 * manager) that escalates a ticket still open when its deadline passes.
 */
import { type DomainInstaller, type Facade, MnemeError, ProjectionReadmodel, defineDomain } from "mneme";
import { ProcessManager } from "mneme/reactions";

export interface OpenTicket {
  ticketUuid: string;
  title: string;
}
export interface CloseTicket {
  ticketUuid: string;
}
export interface EscalateTicket {
  ticketUuid: string;
}
export interface GetTicket {
  ticketUuid: string;
}

export const Helpdesk = defineDomain("Helpdesk", { description: "Tickets of a tenant's customers" });

const uuid = { type: "string", format: "uuid" };
const object = (properties: Record<string, unknown>, required: string[]) => ({
  type: "object",
  properties,
  required,
  additionalProperties: false,
});

export const OpenTicket = Helpdesk.command<OpenTicket>("OpenTicket", {
  description: "Open a ticket",
  schema: object({ ticketUuid: uuid, title: { type: "string", minLength: 1, maxLength: 200 } }, ["ticketUuid", "title"]),
});
export const CloseTicket = Helpdesk.command<CloseTicket>("CloseTicket", {
  description: "Close a ticket",
  schema: object({ ticketUuid: uuid }, ["ticketUuid"]),
});
export const EscalateTicket = Helpdesk.command<EscalateTicket>("EscalateTicket", {
  description: "Escalate a ticket still open (sent by the SLA timer)",
  schema: object({ ticketUuid: uuid }, ["ticketUuid"]),
});

export const TicketOpened = Helpdesk.event<{ title: string }>("TicketOpened");
export const TicketClosed = Helpdesk.event<Record<string, never>>("TicketClosed");
export const TicketEscalated = Helpdesk.event<Record<string, never>>("TicketEscalated");

export interface Ticket {
  status: "none" | "open" | "escalated" | "closed";
  title: string;
}

// `evolve: (on) => [...]`: the state type is inferred from initialState and each payload from its event.
export const TicketAggregate = Helpdesk.aggregate("Ticket", {
  initialState: (): Ticket => ({ status: "none", title: "" }),
  evolve: (on) => [
    on(TicketOpened, (_s, p) => ({ status: "open", title: p.title })),
    on(TicketEscalated, (s) => ({ ...s, status: "escalated" })),
    on(TicketClosed, (s) => ({ ...s, status: "closed" })),
  ],
});

export const GetTicket = Helpdesk.query<GetTicket, { model: Ticket } | undefined>("GetTicket", {
  description: "One ticket of the sender's tenant",
  schema: object({ ticketUuid: uuid }, ["ticketUuid"]),
});

/** How long a ticket may stay open before the SLA timer escalates it. */
export const SLA_MS = Number(process.env.HELPDESK_SLA_MS ?? 4 * 3_600_000);

/** Installs the domain, its projection and its SLA timer on a facade. */
export function registerHelpdesk(facade: Facade): void {
  const tickets = new ProjectionReadmodel(facade, { aggregate: TicketAggregate, name: "Tickets" });
  facade.registerDomain(Helpdesk, (d) => installHelpdesk(d, tickets));
  facade.registerReadmodel(tickets);
  facade.registerReadmodel(
    new ProcessManager<{ scheduled: number }>(facade, { name: "SlaTimer", domain: "Helpdesk", initialState: () => ({ scheduled: 0 }) }).on(
      TicketOpened,
      (ctx, s, _p, e) => {
        // The deadline counts from the event, so a replay computes the same one.
        ctx.schedule(EscalateTicket, { ticketUuid: e.aggregateUuid }, { at: e.createdAt / 1e6 + SLA_MS });
        return { scheduled: s.scheduled + 1 };
      },
    ),
  );
}

function installHelpdesk(d: DomainInstaller, tickets: ProjectionReadmodel<Ticket>): void {
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
  d.handleCommand(EscalateTicket, async (ctx, _cmd, p) => {
    const t = await ctx.aggregates.load(TicketAggregate, p.ticketUuid);
    // Closed in time (or escalated already): nothing to do.
    return t.state.status === "open" ? [TicketEscalated.create(p.ticketUuid, {})] : [];
  });
  d.handleQuery(GetTicket, (ctx, _q, p) => ctx.readmodel(tickets).getModel(p.ticketUuid));
}
