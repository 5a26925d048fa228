/**
 * A small tenant-scoped domain for the shard tests: accounts that take
 * deposits, a projection of them, and "Directory", a domain of global
 * aggregates only (so a sharded app serves it from its home shard).
 */
import { anonymous, defineDomain, type Facade, type ProjectionModel, ProjectionReadmodel } from "mneme";

export interface AccountState {
  balance: number;
  deposits: number;
}

export const Ledger = defineDomain("Ledger", { description: "Accounts for the shard tests" });
export const Deposit = Ledger.command<{ accountUuid: string; amount: number }>("Deposit", { permission: anonymous });
export const GetAccount = Ledger.query<{ accountUuid: string }, ProjectionModel<AccountState> | undefined>("GetAccount", {
  permission: anonymous,
});
export const Deposited = Ledger.event<{ amount: number }>("Deposited");
export const Account = Ledger.aggregate<AccountState>("Account", {
  initialState: () => ({ balance: 0, deposits: 0 }),
  evolve: { Deposited: (s, p: { amount: number }) => ({ balance: s.balance + p.amount, deposits: s.deposits + 1 }) },
});

export const Directory = defineDomain("Directory", { description: "Global entries, served by the home shard" });
export const Register = Directory.command<{ entryUuid: string; name: string }>("Register", { permission: anonymous });
export const Registered = Directory.event<{ name: string }>("Registered");
export const Entry = Directory.aggregate<{ name: string }>("Entry", {
  tenancy: "global",
  initialState: () => ({ name: "" }),
  evolve: { Registered: (_s, p: { name: string }) => ({ name: p.name }) },
});

/** Registers both domains and the accounts projection on a facade; returns the projection. */
export function configureLedger(facade: Facade): ProjectionReadmodel<AccountState> {
  const accounts = new ProjectionReadmodel(facade, { aggregate: Account });
  facade.registerDomain(Ledger, (d) => {
    d.handleCommand(Deposit, async (ctx, _c, p) => {
      await ctx.aggregates.load(Account, p.accountUuid);
      return [Deposited.create(p.accountUuid, { amount: p.amount })];
    });
    d.handleQuery(GetAccount, (ctx, _q, p) => ctx.readmodel(accounts).getModel(p.accountUuid));
  });
  facade.registerDomain(Directory, (d) => {
    d.handleCommand(Register, (_ctx, _c, p) => [Registered.create(p.entryUuid, { name: p.name })]);
  });
  facade.registerReadmodel(accounts);
  return accounts;
}
