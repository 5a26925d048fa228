/**
 * docs/evolution.md, "Changing an aggregate's fold": release 2 folds the same
 * events into a different state, so it bumps `snapshotVersion`. Its loads
 * ignore release 1's snapshots (they fold from the events and save snapshots
 * of version 2), and the leftovers are deleted with `deleteAggregateType`.
 * test/project/evolution-guide.int.test.ts runs it.
 */
import { createFacade, defineDomain, type DomainInstaller, on } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { reqCtx, workspace } from "./workspace.js";

function accounts() {
  const Bank = defineDomain("Bank");
  const Deposited = Bank.event<{ cents: number }>("Deposited");
  const Deposit = Bank.command<{ accountUuid: string; cents: number }>("Deposit");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(Deposit, (_ctx, _cmd, p) => [Deposited.create(p.accountUuid, { cents: p.cents })]);
  };
  return { Bank, Deposited, Deposit, install };
}

function release1() {
  const d = accounts();
  const Account = d.Bank.aggregate<{ balance: number }>("Account", {
    initialState: () => ({ balance: 0 }),
    evolve: [on(d.Deposited, (s, p) => ({ balance: s.balance + p.cents }))],
    snapshotEvery: 2, // a snapshot each time a load folds past a multiple of 2
  });
  return { ...d, Account };
}

function release2() {
  const d = accounts();
  const Account = d.Bank.aggregate<{ balance: number; deposits: number }>("Account", {
    initialState: () => ({ balance: 0, deposits: 0 }),
    evolve: [on(d.Deposited, (s, p) => ({ balance: s.balance + p.cents, deposits: s.deposits + 1 }))],
    snapshotEvery: 2,
    snapshotVersion: 2, // the state changed shape: version 1 snapshots must not be read as this state
  });
  return { ...d, Account };
}

/** Release 1 deposits and snapshots; release 2 loads, snapshots anew and prunes; returns what it saw. */
export async function main(): Promise<{
  state: { balance: number; deposits: number };
  snapshotVersions: (number | undefined)[];
  deleted: number;
  afterCleanup: (number | undefined)[];
}> {
  const ws = workspace("changing-a-fold");
  try {
    const r1 = release1();
    const f1 = createFacade({ appName: "bank", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(r1.Bank, r1.install);
    await f1.start();
    for (const cents of [100, 250, 50]) await f1.dispatch(r1.Deposit, { accountUuid: "acc-1", cents }, { reqCtx });
    await f1.loadAggregate(r1.Account, "acc-1"); // folds 3 events: saves a snapshot of version 1 at version 2 or 3
    await f1.stop(); // waits for snapshot saves in flight

    const r2 = release2();
    const f2 = createFacade({ appName: "bank", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(r2.Bank, r2.install);
    await f2.start(); // a new process: its aggregate cache starts empty
    const state = (await f2.loadAggregate(r2.Account, "acc-1")).state; // every event folded by the new evolve
    await f2.stop();

    const stores = createSqliteBackends({ filename: ws.filename });
    const snapshots = stores.snapshotStore;
    await snapshots.init();
    const versions = async () =>
      Promise.all([1, 2].map(async (v) => (await snapshots.latest("Bank", "Account", "acc-1", v))?.snapshotVersion));
    const snapshotVersions = await versions(); // [1, 2]: both kept until pruned, so a rolling deploy reads its own
    // Once no instance of release 1 runs any more:
    const deleted = await snapshots.deleteAggregateType("Bank", "Account", { exceptSnapshotVersion: 2 });
    const afterCleanup = await versions(); // [undefined, 2]
    await snapshots.close();
    return { state, snapshotVersions, deleted, afterCleanup };
  } finally {
    ws.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await main());
