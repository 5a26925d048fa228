/**
 * Read checks: every aggregate a command handler loads is checked at the
 * append, also those it appends nothing to, so a decision taken on a state
 * that moved meanwhile fails with CONFLICT and writes nothing — on one
 * instance whatever its in-process lock does, and across instances (two
 * facades on one memory store, one SQLite file, one Postgres schema).
 * `{ check: false }` lets a read that decides nothing through.
 */
import { describe, expect, it } from "vitest";
import { createFacade, defineDomain, MnemeError, newUuid, type Facade, type FacadeOptions } from "mneme";
import { rejection } from "../support/rejections.js";
import { alice, sharedPlaces } from "../support/shared-places.js";
import { startedFacades } from "../support/started-facades.js";

/** A promise and the function that settles it. */
function latch(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

/** Pauses handlers where a test wants them: `pause[name]` is awaited there when set. */
type Pauses = Partial<Record<"withdraw" | "freeze" | "open", (() => Promise<void>) | undefined>>;

function bankDomain(pauses: Pauses, policySnapshotEvery?: number) {
  const Bank = defineDomain("Bank");
  const Deposited = Bank.event<{ amount: number }>("Deposited");
  const Withdrawn = Bank.event<{ amount: number }>("Withdrawn");
  const AccountOpened = Bank.event<{ owner: string }>("AccountOpened");
  const PolicySet = Bank.event<{ limit: number }>("PolicySet");
  const PolicyFrozen = Bank.event<object>("PolicyFrozen");
  const BanIssued = Bank.event<object>("BanIssued");
  const Account = Bank.aggregate<{ balance: number }>("Account", {
    initialState: () => ({ balance: 0 }),
    evolve: {
      AccountOpened: (s) => s,
      Deposited: (s, p: { amount: number }) => ({ balance: s.balance + p.amount }),
      Withdrawn: (s, p: { amount: number }) => ({ balance: s.balance - p.amount }),
    },
  });
  const Policy = Bank.aggregate<{ frozen: boolean; limit: number }>("Policy", {
    ...(policySnapshotEvery === undefined ? {} : { snapshotEvery: policySnapshotEvery }),
    initialState: () => ({ frozen: false, limit: 0 }),
    evolve: {
      PolicySet: (s, p: { limit: number }) => ({ ...s, limit: p.limit }),
      PolicyFrozen: (s) => ({ ...s, frozen: true }),
    },
  });
  const Ban = Bank.aggregate<{ banned: boolean }>("Ban", {
    initialState: () => ({ banned: false }),
    evolve: { BanIssued: () => ({ banned: true }) },
  });

  const Deposit = Bank.command<{ accountUuid: string; amount: number }>("Deposit");
  Bank.handleCommand(Deposit, (_ctx, _cmd, p) => [Deposited.create(p.accountUuid, { amount: p.amount })]);
  const SetPolicy = Bank.command<{ policyUuid: string; limit: number }>("SetPolicy");
  Bank.handleCommand(SetPolicy, (_ctx, _cmd, p) => [PolicySet.create(p.policyUuid, { limit: p.limit })]);

  /** Loads the account, then the policy, decides on both, appends to the account only. */
  const GuardedWithdraw = Bank.command<{ accountUuid: string; policyUuid: string; amount: number; checkPolicy?: boolean }>(
    "GuardedWithdraw",
  );
  Bank.handleCommand(GuardedWithdraw, async (ctx, _cmd, p) => {
    const account = await ctx.aggregates.load(Account, p.accountUuid);
    const policy = await ctx.aggregates.load(Policy, p.policyUuid, p.checkPolicy === false ? { check: false } : undefined);
    await pauses.withdraw?.();
    if (policy.state.frozen) throw new MnemeError("INVALID_ACTION", "the policy is frozen");
    if (p.amount > policy.state.limit || p.amount > account.state.balance) throw new MnemeError("INVALID_ACTION", "over the limit");
    return [Withdrawn.create(p.accountUuid, { amount: p.amount })];
  });
  const FreezePolicy = Bank.command<{ policyUuid: string }>("FreezePolicy");
  Bank.handleCommand(FreezePolicy, async (ctx, _cmd, p) => {
    await ctx.aggregates.load(Policy, p.policyUuid);
    await pauses.freeze?.();
    return [PolicyFrozen.create(p.policyUuid, {})];
  });

  /** Opens an account unless its owner is banned: the ban is loaded at version 0 and must still not exist at the append. */
  const OpenAccount = Bank.command<{ accountUuid: string; owner: string }>("OpenAccount");
  Bank.handleCommand(OpenAccount, async (ctx, _cmd, p) => {
    const ban = await ctx.aggregates.load(Ban, `ban-${p.owner}`);
    await pauses.open?.();
    if (ban.state.banned) throw new MnemeError("INVALID_ACTION", "banned");
    return [AccountOpened.create(p.accountUuid, { owner: p.owner })];
  });
  const IssueBan = Bank.command<{ owner: string }>("IssueBan");
  Bank.handleCommand(IssueBan, (_ctx, _cmd, p) => [BanIssued.create(`ban-${p.owner}`, {})]);

  /** Reads the policy twice; between the two reads the test may move it. */
  const ReadTwice = Bank.command<{ accountUuid: string; policyUuid: string; check: boolean }>("ReadTwice");
  Bank.handleCommand(ReadTwice, async (ctx, _cmd, p) => {
    await ctx.aggregates.load(Policy, p.policyUuid, { check: p.check });
    await pauses.withdraw?.();
    await ctx.aggregates.load(Policy, p.policyUuid, { check: p.check });
    return [Deposited.create(p.accountUuid, { amount: 1 })];
  });
  /** Loads and appends nothing. */
  const Peek = Bank.command<{ policyUuid: string }>("Peek");
  Bank.handleCommand(Peek, async (ctx, _cmd, p) => {
    await ctx.aggregates.load(Policy, p.policyUuid);
    await pauses.withdraw?.();
    return [];
  });
  const LoadWith = Bank.command<{ policyUuid: string; opts: unknown }>("LoadWith");
  Bank.handleCommand(LoadWith, async (ctx, _cmd, p) => {
    await ctx.aggregates.load(Policy, p.policyUuid, p.opts as { check?: boolean });
    return [];
  });
  return { Bank, Policy, GuardedWithdraw, FreezePolicy, Deposit, SetPolicy, OpenAccount, IssueBan, ReadTwice, Peek, LoadWith };
}

/** `pauses[name]` stops its handler until the returned `release` is called; `reached` resolves once it stopped there. */
function pauseAt(pauses: Pauses, name: keyof Pauses): { reached: Promise<void>; release: () => void } {
  const reached = latch();
  const gate = latch();
  pauses[name] = async () => {
    pauses[name] = undefined;
    reached.open();
    await gate.wait;
  };
  return { reached: reached.wait, release: gate.open };
}

async function setUp(f: Facade, d: ReturnType<typeof bankDomain>): Promise<{ accountUuid: string; policyUuid: string }> {
  const accountUuid = newUuid();
  const policyUuid = newUuid();
  await f.dispatch(d.Deposit, { accountUuid, amount: 100 }, { reqCtx: alice });
  await f.dispatch(d.SetPolicy, { policyUuid, limit: 50 }, { reqCtx: alice });
  return { accountUuid, policyUuid };
}

const started = startedFacades();

describe("one instance (memory): the in-process lock does not decide", () => {
  it("a withdrawal that read the policy before a freeze committed fails with CONFLICT and writes nothing", async () => {
    const pauses: Pauses = {};
    const d = bankDomain(pauses);
    const f = await started((f) => f.registerDomain(d.Bank));
    const { accountUuid, policyUuid } = await setUp(f, d);
    // The freeze loads the policy first (and holds its in-process lock), so the withdrawal, which loads its
    // account first, reads the policy unlocked: the two decisions interleave inside one facade.
    const freezing = pauseAt(pauses, "freeze");
    const freeze = f.dispatch(d.FreezePolicy, { policyUuid }, { reqCtx: alice });
    await freezing.reached;
    const deciding = pauseAt(pauses, "withdraw");
    const withdraw = f.dispatch(d.GuardedWithdraw, { accountUuid, policyUuid, amount: 10 }, { reqCtx: alice });
    await deciding.reached;
    freezing.release();
    await freeze;
    const head = await f.eventRepository.headPosition();
    deciding.release();
    const err = await rejection(withdraw);
    expect(err.code, err.message).toBe("CONFLICT");
    expect(err.message).toContain(policyUuid);
    expect(await f.eventRepository.headPosition()).toBe(head);
    expect((await f.eventRepository.loadAggregate(accountUuid)).map((e) => e.name)).toEqual(["Deposited"]);
  });

  it("the same interleaving with { check: false } on the policy commits (the read decided nothing, by the handler's word)", async () => {
    const pauses: Pauses = {};
    const d = bankDomain(pauses);
    const f = await started((f) => f.registerDomain(d.Bank));
    const { accountUuid, policyUuid } = await setUp(f, d);
    const freezing = pauseAt(pauses, "freeze");
    const freeze = f.dispatch(d.FreezePolicy, { policyUuid }, { reqCtx: alice });
    await freezing.reached;
    const deciding = pauseAt(pauses, "withdraw");
    const withdraw = f.dispatch(d.GuardedWithdraw, { accountUuid, policyUuid, amount: 10, checkPolicy: false }, { reqCtx: alice });
    await deciding.reached;
    freezing.release();
    await freeze;
    deciding.release();
    expect((await withdraw).events.map((e) => e.name)).toEqual(["Withdrawn"]);
  });

  it("an aggregate loaded twice at two versions is CONFLICT at the second load when checked, and not when neither load checks", async () => {
    const pauses: Pauses = {};
    const d = bankDomain(pauses);
    const f = await started((f) => f.registerDomain(d.Bank));
    const { accountUuid, policyUuid } = await setUp(f, d);
    for (const check of [true, false]) {
      const between = pauseAt(pauses, "withdraw");
      const run = f.dispatch(d.ReadTwice, { accountUuid, policyUuid, check }, { reqCtx: alice });
      await between.reached;
      await f.dispatch(d.SetPolicy, { policyUuid, limit: 60 }, { reqCtx: alice });
      between.release();
      if (check) expect((await rejection(run)).code).toBe("CONFLICT");
      else expect((await run).events).toHaveLength(1);
    }
    expect((await f.eventRepository.loadAggregate(accountUuid)).map((e) => e.name)).toEqual(["Deposited", "Deposited"]);
  });

  it("a command that loads and appends nothing succeeds whatever moved; a bad check option is INVALID_REQUEST", async () => {
    const pauses: Pauses = {};
    const d = bankDomain(pauses);
    const f = await started((f) => f.registerDomain(d.Bank));
    const { policyUuid } = await setUp(f, d);
    const peeking = pauseAt(pauses, "withdraw");
    const peek = f.dispatch(d.Peek, { policyUuid }, { reqCtx: alice });
    await peeking.reached;
    // SetPolicy appends without loading, so it does not wait for the lock Peek holds.
    await f.dispatch(d.SetPolicy, { policyUuid, limit: 1 }, { reqCtx: alice });
    peeking.release();
    expect((await peek).events).toEqual([]);
    for (const opts of [{ check: "no" }, { check: 0 }, null, "x"]) {
      const err = await rejection(f.dispatch(d.LoadWith, { policyUuid, opts }, { reqCtx: alice }));
      expect(err.code, JSON.stringify(opts)).toBe("INVALID_REQUEST");
    }
    expect((await f.dispatch(d.LoadWith, { policyUuid, opts: {} }, { reqCtx: alice })).events).toEqual([]);
  });
});

const places = sharedPlaces("readcheck");

describe.each(places)("two instances on %s", (_name, placeOf) => {
  async function pair(opts: Partial<FacadeOptions> = {}, policySnapshotEvery?: number) {
    const pauses: Pauses = {};
    const d = bankDomain(pauses, policySnapshotEvery);
    const stores = placeOf();
    const [a, b] = [stores(), stores()];
    const f1 = createFacade({ appName: "read-check-1", ...a, ...opts }).registerDomain(d.Bank);
    const f2 = createFacade({ appName: "read-check-2", ...b, ...opts }).registerDomain(d.Bank);
    await f1.start();
    await f2.start();
    const stop = async () => {
      await f2.stop();
      await f1.stop();
    };
    return { d, f1, f2, pauses, stop };
  }

  for (const checkPolicy of [true, false]) {
    it(`GuardedWithdraw on one instance while the other freezes the policy: ${checkPolicy ? "CONFLICT, nothing written" : "{ check: false } commits"}`, async () => {
      const { d, f1, f2, pauses, stop } = await pair();
      try {
        const { accountUuid, policyUuid } = await setUp(f1, d);
        const deciding = pauseAt(pauses, "withdraw");
        const commandUuid = newUuid();
        const withdraw = f1.dispatch(
          d.GuardedWithdraw,
          { accountUuid, policyUuid, amount: 10, checkPolicy },
          { reqCtx: alice, commandUuid },
        );
        await deciding.reached;
        await f2.dispatch(d.FreezePolicy, { policyUuid }, { reqCtx: alice });
        const head = await f1.eventRepository.headPosition();
        deciding.release();
        if (checkPolicy) {
          const err = await rejection(withdraw);
          expect(err.code, err.message).toBe("CONFLICT");
          expect(await f1.eventRepository.headPosition()).toBe(head);
          expect((await f2.eventRepository.loadAggregate(accountUuid)).map((e) => e.name)).toEqual(["Deposited"]);
          expect((await f1.commandStore.get(commandUuid))?.status).toBe("failed");
          // Asked again, it reads the frozen policy and refuses for that reason.
          const again = await rejection(f1.dispatch(d.GuardedWithdraw, { accountUuid, policyUuid, amount: 10 }, { reqCtx: alice }));
          expect(again.code).toBe("INVALID_ACTION");
        } else {
          expect((await withdraw).events.map((e) => [e.name, e.version])).toEqual([["Withdrawn", 2]]);
        }
      } finally {
        await stop();
      }
    });
  }

  it("an aggregate loaded at version 0 must still not exist at the append", async () => {
    const { d, f1, f2, pauses, stop } = await pair();
    try {
      const owner = newUuid();
      const accountUuid = newUuid();
      const opening = pauseAt(pauses, "open");
      const open = f1.dispatch(d.OpenAccount, { accountUuid, owner }, { reqCtx: alice });
      await opening.reached;
      await f2.dispatch(d.IssueBan, { owner }, { reqCtx: alice });
      opening.release();
      expect((await rejection(open)).code).toBe("CONFLICT");
      expect(await f2.eventRepository.loadAggregate(accountUuid)).toEqual([]);
    } finally {
      await stop();
    }
  });

  it("loaded from a snapshot (cache off): the snapshot's version is the one checked", async () => {
    const { d, f1, f2, pauses, stop } = await pair({ aggregateCache: false }, 1);
    try {
      const { accountUuid, policyUuid } = await setUp(f2, d);
      // A load folds past version 1 and saves a snapshot there (in the background): wait until it is stored.
      await f1.loadAggregate(d.Policy, policyUuid);
      for (let i = 0; i < 500 && (await f1.snapshotStore.latest("Bank", "Policy", policyUuid, 1))?.version !== 1; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      expect((await f1.snapshotStore.latest("Bank", "Policy", policyUuid, 1))?.version).toBe(1);
      const deciding = pauseAt(pauses, "withdraw");
      const withdraw = f1.dispatch(d.GuardedWithdraw, { accountUuid, policyUuid, amount: 10 }, { reqCtx: alice });
      await deciding.reached;
      await f2.dispatch(d.FreezePolicy, { policyUuid }, { reqCtx: alice });
      deciding.release();
      expect((await rejection(withdraw)).code).toBe("CONFLICT");
      expect((await f2.eventRepository.loadAggregate(accountUuid)).map((e) => e.name)).toEqual(["Deposited"]);
    } finally {
      await stop();
    }
  });

  it("with the aggregate cache off too: the version checked is the one loaded", async () => {
    const { d, f1, f2, pauses, stop } = await pair({ aggregateCache: false });
    try {
      const { accountUuid, policyUuid } = await setUp(f2, d);
      const deciding = pauseAt(pauses, "withdraw");
      const withdraw = f1.dispatch(d.GuardedWithdraw, { accountUuid, policyUuid, amount: 10 }, { reqCtx: alice });
      await deciding.reached;
      await f2.dispatch(d.SetPolicy, { policyUuid, limit: 5 }, { reqCtx: alice });
      deciding.release();
      expect((await rejection(withdraw)).code).toBe("CONFLICT");
      // Nothing moved since: the next try decides on the new limit.
      expect((await rejection(f1.dispatch(d.GuardedWithdraw, { accountUuid, policyUuid, amount: 10 }, { reqCtx: alice }))).code).toBe(
        "INVALID_ACTION",
      );
      expect((await f1.dispatch(d.GuardedWithdraw, { accountUuid, policyUuid, amount: 5 }, { reqCtx: alice })).events).toHaveLength(1);
    } finally {
      await stop();
    }
  });
});
