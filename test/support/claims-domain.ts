/**
 * A domain for the claim tests of idempotent dispatch: Charge appends an
 * event, Notify appends none (its only effect is outside: here a counter).
 * Both count their handler runs and wait on `hooks.beforeEffect` first, so a
 * test can hold a command in progress.
 */
import { defineDomain } from "mneme";

export const hooks: { beforeEffect: (command: string) => Promise<void> | void } = { beforeEffect: () => undefined };

/** Handler runs in this process, by command name. */
export const runs = { Charge: 0, Notify: 0 };

const D = defineDomain("Claims");
export const Charged = D.event<{ amount: number }>("Charged");
export const Account = D.aggregate<{ total: number }>("Account", {
  initialState: () => ({ total: 0 }),
  evolve: { Charged: (s, p: { amount: number }) => ({ total: s.total + p.amount }) },
});
export const Charge = D.command<{ accountUuid: string; amount: number }>("Charge");
export const Notify = D.command<{ to: string }>("Notify");
D.handleCommand(Charge, async (ctx, _cmd, p) => {
  runs.Charge++;
  await ctx.aggregates.load(Account, p.accountUuid);
  await hooks.beforeEffect("Charge");
  return [Charged.create(p.accountUuid, { amount: p.amount })];
});
D.handleCommand(Notify, async () => {
  runs.Notify++;
  await hooks.beforeEffect("Notify");
});
export const Claims = D;
