/**
 * docs/evolution.md, "Renaming an event": release 1 called it BookLent,
 * release 2 calls it LoanStarted with `renamedFrom: "BookLent"`. Stored
 * BookLent events read as LoanStarted on every read path, and a filter on the
 * new name (readAll's eventPaths, a handler for LoanStarted) finds them.
 * test/project/evolution-guide.int.test.ts runs it.
 */
import { BaseReadmodel, createFacade, defineDomain, type DomainInstaller, type Event, type Facade } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { reqCtx, workspace } from "./workspace.js";

interface Loan {
  bookUuid: string;
  reader: string;
}

function release1() {
  const Library = defineDomain("Library");
  const BookLent = Library.event<Loan>("BookLent");
  const Lend = Library.command<Loan>("Lend");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(Lend, (_ctx, _cmd, p) => [BookLent.create(p.bookUuid, p)]);
  };
  return { Library, Lend, install };
}

function release2() {
  const Library = defineDomain("Library");
  const LoanStarted = Library.event<Loan>("LoanStarted", { renamedFrom: "BookLent" });
  const Lend = Library.command<Loan>("Lend");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(Lend, (_ctx, _cmd, p) => [LoanStarted.create(p.bookUuid, p)]);
  };
  return { Library, LoanStarted, Lend, install };
}

/** Loans per reader: a readmodel of release 2 that knows only the new name. */
class LoansPerReader extends BaseReadmodel {
  constructor(facade: Facade, LoanStarted: ReturnType<typeof release2>["LoanStarted"]) {
    super(facade);
    this.domain = "Library";
    this.name = "LoansPerReader";
    this.addDomainEventHandler(LoanStarted, async (_ctx, _event, loan) => {
      const loans = this.collection<{ count: number }>("loans");
      await loans.put(loan.reader, { count: ((await loans.get(loan.reader))?.count ?? 0) + 1 });
    });
  }

  async loansOf(reader: string): Promise<number> {
    return (await this.collection<{ count: number }>("loans").get(reader))?.count ?? 0;
  }
}

/** Release 1 lends two books, release 2 one more; returns what release 2 reads and what is stored. */
export async function main(): Promise<{ filtered: string[]; adaLoans: number; storedNames: string[] }> {
  const ws = workspace("renaming-an-event");
  try {
    const r1 = release1();
    const f1 = createFacade({ appName: "library", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(
      r1.Library,
      r1.install,
    );
    await f1.start();
    await f1.dispatch(r1.Lend, { bookUuid: "b-1", reader: "ada" }, { reqCtx });
    await f1.dispatch(r1.Lend, { bookUuid: "b-2", reader: "alan" }, { reqCtx });
    await f1.stop();

    const r2 = release2();
    const f2 = createFacade({ appName: "library", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(
      r2.Library,
      r2.install,
    );
    const loans = new LoansPerReader(f2, r2.LoanStarted);
    f2.registerReadmodel(loans); // new: its first start replays the store from position 1, BookLent events included
    await f2.start();
    await f2.dispatch(r2.Lend, { bookUuid: "b-3", reader: "ada" }, { reqCtx, waitToFinish: true });

    // A filter on the new name also finds the events stored under the old one.
    const filtered: Event[] = [];
    for await (const page of f2.eventRepository.readAll({ eventPaths: ["Library.LoanStarted"] })) filtered.push(...page);
    const adaLoans = await loans.loansOf("ada"); // 2: one BookLent, one LoanStarted
    await f2.stop();

    const raw = createSqliteBackends({ filename: ws.filename }).eventRepository;
    await raw.init();
    const storedNames: string[] = [];
    for await (const page of raw.readAll()) storedNames.push(...page.map((e) => e.name));
    await raw.close();
    return { filtered: filtered.map((e) => `${e.name} ${e.aggregateUuid}`), adaLoans, storedNames };
  } finally {
    ws.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await main());
