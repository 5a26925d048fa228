/**
 * A user-defined error code end to end: a command and a query throwing codes
 * made with defineErrorCode answer over node:http with the status each was
 * defined with, as problem+json carrying the code; through facade.dispatch the
 * same error is found by isMnemeError with the code.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Facade, MnemeError, defineDomain, defineErrorCode, isMnemeError, newUuid } from "mneme";
import { TENANT_A, USER, call, serve, startFacade, type TestServer, HTTP_PATHS } from "../support/http-fixture.js";

const INSUFFICIENT_FUNDS = defineErrorCode("INSUFFICIENT_FUNDS", { status: 422, description: "The balance does not cover the amount" });
const ACCOUNT_CLOSED = defineErrorCode("ACCOUNT_CLOSED", { status: 410, description: "The account is closed" });

interface Deposit {
  accountUuid: string;
  amount: number;
}
interface Withdraw {
  accountUuid: string;
  amount: number;
}
interface Deposited {
  amount: number;
}
interface Withdrawn {
  amount: number;
}

const Bank = defineDomain("Bank", { description: "Accounts with a balance" });
const DepositCmd = Bank.command<Deposit>("Deposit");
const WithdrawCmd = Bank.command<Withdraw>("Withdraw");
const GetClosedAccount = Bank.query<{ accountUuid: string }, unknown>("GetClosedAccount");
const DepositedEvt = Bank.event<Deposited>("Deposited");
const WithdrawnEvt = Bank.event<Withdrawn>("Withdrawn");
const Account = Bank.aggregate<{ balance: number }>("Account", {
  initialState: () => ({ balance: 0 }),
  evolve: {
    Deposited: (s, p: Deposited) => ({ balance: s.balance + p.amount }),
    Withdrawn: (s, p: Withdrawn) => ({ balance: s.balance - p.amount }),
  },
});
Bank.handleCommand(DepositCmd, async (ctx, _c, p) => {
  await ctx.aggregates.load(Account, p.accountUuid);
  return [DepositedEvt.create(p.accountUuid, { amount: p.amount })];
});
Bank.handleCommand(WithdrawCmd, async (ctx, _c, p) => {
  const account = await ctx.aggregates.load(Account, p.accountUuid);
  if (account.state.balance < p.amount) {
    throw new MnemeError(INSUFFICIENT_FUNDS, `the balance ${account.state.balance} does not cover ${p.amount}`);
  }
  return [WithdrawnEvt.create(p.accountUuid, { amount: p.amount })];
});
Bank.handleQuery(GetClosedAccount, (_ctx, _q, p) => {
  throw new MnemeError(ACCOUNT_CLOSED, `account ${p.accountUuid} is closed`);
});

describe.each(HTTP_PATHS)("over node:http, %s path", (httpPath) => {
  let facade: Facade;
  let srv: TestServer;
  const serverErrors: unknown[] = [];
  const t = (path: string) => `/api/tenants/${TENANT_A}${path}`;

  beforeAll(async () => {
    facade = await startFacade();
    facade.registerDomain(Bank);
    srv = await serve(facade, { onError: (e) => serverErrors.push(e) }, httpPath);
  });
  afterAll(async () => {
    await srv.close();
    await facade.stop();
  });

  describe("user-defined error codes over HTTP", () => {
    it("a command throwing a user code answers with its status and code; nothing is appended", async () => {
      const accountUuid = newUuid();
      const ok = await call(srv.url, "POST", t("/commands/Bank/Deposit?wait=true"), {
        body: { accountUuid, amount: 10 },
        headers: USER.headers,
      });
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      const head = await facade.eventRepository.headPosition();

      const r = await call(srv.url, "POST", t("/commands/Bank/Withdraw"), { body: { accountUuid, amount: 25 }, headers: USER.headers });
      expect(r.status, JSON.stringify(r.body)).toBe(422);
      expect(r.headers.get("content-type")).toBe("application/problem+json");
      expect(r.body).toMatchObject({
        type: "urn:mneme:error:INSUFFICIENT_FUNDS",
        title: "Unprocessable Content",
        status: 422,
        code: "INSUFFICIENT_FUNDS",
        detail: "the balance 10 does not cover 25",
      });
      expect(await facade.eventRepository.headPosition()).toBe(head);

      const fine = await call(srv.url, "POST", t("/commands/Bank/Withdraw"), { body: { accountUuid, amount: 4 }, headers: USER.headers });
      expect(fine.status, JSON.stringify(fine.body)).toBe(200);
    });

    it("a query throwing a user code answers with its status", async () => {
      const r = await call(srv.url, "POST", t("/queries/Bank/GetClosedAccount"), {
        body: { accountUuid: newUuid() },
        headers: USER.headers,
      });
      expect(r.status, JSON.stringify(r.body)).toBe(410);
      expect(r.body).toMatchObject({ code: "ACCOUNT_CLOSED", status: 410, title: "Gone" });
    });

    it("mneme's own codes keep their status next to user codes, and a 4xx user code is not reported as a server error", async () => {
      const r = await call(srv.url, "POST", t("/commands/Bank/Nothing"), { body: {}, headers: USER.headers });
      expect(r.status).toBe(404);
      expect(r.body).toMatchObject({ code: "UNKNOWN_COMMAND" });
      expect(serverErrors).toEqual([]);
    });

    it("through facade.dispatch the error keeps its code for isMnemeError", async () => {
      const accountUuid = newUuid();
      const error = await facade.dispatch(WithdrawCmd, { accountUuid, amount: 1 }, { reqCtx: USER.reqCtx }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isMnemeError(error, INSUFFICIENT_FUNDS)).toBe(true);
      expect(isMnemeError(error, "INVALID_ACTION")).toBe(false);
    });
  });
});
