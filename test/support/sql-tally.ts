/**
 * A SQL-table readmodel for tests: per tenant and counter a total (a tenant
 * table), and per position how many times its application was committed (a
 * global table, a counter row per position, so a batch that commits twice
 * shows 2). A gate can hold the handler on one position after its batch has
 * begun; `failOn` makes it throw after it wrote.
 */
import { anonymous, defineDomain, type Event, type Facade, type ReadmodelOption, SqlTableReadmodel } from "mneme";

export const Tally = defineDomain("Tally", { description: "Counters kept in SQL tables, for tests" });
export const Add = Tally.command<{ counterUuid: string; by: number }>("Add", { permission: anonymous });
export const AddMany = Tally.command<{ counterUuids: string[]; by: number }>("AddMany", { permission: anonymous });
export const Added = Tally.event<{ by: number }>("Added");
export const GetTotals = Tally.query<Record<string, never>, { totals: Record<string, number> }>("GetTotals", { permission: anonymous });

Tally.handleCommand(Add, (_ctx, _c, p) => [Added.create(p.counterUuid, { by: p.by })]);
Tally.handleCommand(AddMany, (_ctx, _c, p) => p.counterUuids.map((u) => Added.create(u, { by: p.by })));
Tally.handleQuery(GetTotals, async (ctx) => ({ totals: await ctx.readmodel<SqlTally>("SqlTally").totals() }));

interface Db {
  totals: { tenant_uuid: string; counter: string; total: number };
  applied: { position: number; times: number };
}

export class SqlTally extends SqlTableReadmodel<Db> {
  holdAt: { position: number; entered: () => void; wait: Promise<void> } | undefined;
  failOn: ((e: Event) => boolean) | undefined;
  /** Write through Kysely instead of the helpers. */
  viaKysely = false;

  constructor(facade: Facade, ...options: ReadmodelOption[]) {
    super(
      facade,
      {
        tables: { totals: {}, applied: { tenancy: "global" } },
        ddl: (t) => [
          `CREATE TABLE ${t("totals")} (tenant_uuid TEXT NOT NULL, counter TEXT NOT NULL, total BIGINT NOT NULL, PRIMARY KEY (tenant_uuid, counter))`,
          `CREATE INDEX ${t.id("totals_by_total")} ON ${t("totals")} (tenant_uuid, total)`,
          `CREATE TABLE ${t("applied")} (position BIGINT PRIMARY KEY, times BIGINT NOT NULL)`,
        ],
      },
      ...options,
    );
    this.domain = "Tally";
    this.name = "SqlTally";
    this.addDomainEventHandler(Added, async (_ctx, event, p) => {
      const hold = this.holdAt;
      if (hold !== undefined && hold.position === event.position) {
        this.holdAt = undefined;
        hold.entered();
        await hold.wait;
      }
      if (this.viaKysely) {
        await this.sql.kysely
          .insertInto("totals")
          .values({ tenant_uuid: this.sql.tenantUuid!, counter: event.aggregateUuid, total: p.by })
          .onConflict((oc) =>
            oc.columns(["tenant_uuid", "counter"]).doUpdateSet((eb) => ({ total: eb("totals.total", "+", eb.ref("excluded.total")) })),
          )
          .execute();
      } else {
        await this.sql.upsert("totals", { counter: event.aggregateUuid, total: p.by }, { key: ["counter"], add: ["total"] });
      }
      await this.sql.upsert("applied", { position: event.position, times: 1 }, { key: ["position"], add: ["times"] });
      if (this.failOn?.(event)) throw new Error(`refusing position ${event.position}`);
    });
  }

  /** Totals by counter: a tenant's view sees its own. */
  async totals(): Promise<Record<string, number>> {
    const rows = await this.sql.query<{ counter: string; total: number | string }>(
      `SELECT counter, total FROM ${this.sql.from("totals")} ORDER BY counter`,
    );
    return Object.fromEntries(rows.map((r) => [r.counter, Number(r.total)]));
  }

  /** The same through Kysely's reader. */
  async totalsViaKysely(): Promise<Record<string, number>> {
    const rows = await this.sql.reader.selectFrom("totals").select(["counter", "total"]).orderBy("counter").execute();
    return Object.fromEntries(rows.map((r) => [r.counter, Number(r.total)]));
  }

  /** position -> times applied (a global table). */
  async appliedTimes(): Promise<Record<number, number>> {
    const rows = await this.sql.query<{ position: number | string; times: number | string }>(
      `SELECT position, times FROM ${this.sql.from("applied")} ORDER BY position`,
    );
    return Object.fromEntries(rows.map((r) => [Number(r.position), Number(r.times)]));
  }
}
