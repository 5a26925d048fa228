/**
 * docs/evolution.md, "Rebuilding a readmodel": release 2 changes what a
 * readmodel keeps, so its documents are rebuilt from the event store with a
 * restore from zero through the Runtime. The rebuild fills a new generation
 * beside the served one: queries keep reading the old documents, whole,
 * until the switch; the Runtime's listing shows the progress.
 * test/project/evolution-guide.int.test.ts runs it.
 */
import {
  BaseReadmodel,
  createFacade,
  defineDomain,
  type DomainInstaller,
  type Facade,
  isMnemeError,
  type RequestContext,
  withRestoreBatchSize,
} from "mneme";
import { ListEventHandlers, type RestorationProgress } from "mneme/runtime";
import { createSqliteBackends } from "mneme/sqlite";
import { reqCtx, workspace } from "./workspace.js";

const Catalog = defineDomain("Catalog");
const Priced = Catalog.event<{ cents: number }>("Priced");
const SetPrice = Catalog.command<{ sku: string; cents: number }>("SetPrice");
/** The Catalog domain's install step: both releases register it with `registerDomain(Catalog, installCatalog)`. */
function installCatalog(d: DomainInstaller): void {
  d.handleCommand(SetPrice, (_ctx, _cmd, p) => [Priced.create(p.sku, { cents: p.cents })]);
}

/** For the example only: holds a rebuild at one position, so that the page can show what readers see meanwhile. */
interface Hold {
  readonly atPosition: number;
  readonly reached: () => void;
  readonly until: Promise<void>;
}

/** The label of each product's price: release 1 writes "9.99", release 2 "EUR 9.99". */
class PriceLabels extends BaseReadmodel {
  constructor(facade: Facade, label: (cents: number) => string, hold?: Hold) {
    super(facade, withRestoreBatchSize(1)); // one event per page, so that this small example shows progress
    this.domain = "Catalog";
    this.name = "PriceLabels";
    this.addDomainEventHandler(Priced, async (ctx, event, p) => {
      if (hold !== undefined && ctx.restoring && event.position === hold.atPosition) {
        hold.reached();
        await hold.until;
      }
      await this.collection<{ label: string }>("labels").put(event.aggregateUuid, { label: label(p.cents) });
    });
  }

  async labelOf(sku: string): Promise<string | undefined> {
    return (await this.collection<{ label: string }>("labels").get(sku))?.label;
  }
}

const euros = (cents: number): string => (cents / 100).toFixed(2);

/** Who asks the Runtime for the listing (an authorized caller). */
const operator: RequestContext = { ...reqCtx, senderIdentityUuid: "operator" };

/** Release 1 prices three products; release 2 rebuilds the labels; returns what a reader saw before, during and after. */
export async function main(): Promise<{
  before: string | undefined;
  during: string | undefined;
  progress: RestorationProgress | undefined;
  secondRestore: string;
  after: string | undefined;
  replayed: string;
}> {
  const ws = workspace("rebuilding-a-readmodel");
  try {
    const f1 = createFacade({ appName: "catalog", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(
      Catalog,
      installCatalog,
    );
    f1.registerReadmodel(new PriceLabels(f1, euros));
    await f1.start();
    for (const [sku, cents] of [
      ["sku-1", 999],
      ["sku-2", 1999],
      ["sku-3", 500],
    ] as const) {
      await f1.dispatch(SetPrice, { sku, cents }, { reqCtx, waitToFinish: true });
    }
    await f1.stop();

    let reached!: () => void;
    let resume!: () => void;
    const hold: Hold = { atPosition: 3, reached: () => reached(), until: new Promise((r) => (resume = r)) };
    const atHold = new Promise<void>((r) => (reached = r));

    const f2 = createFacade({ appName: "catalog", ...createSqliteBackends({ filename: ws.filename }) }).registerDomain(
      Catalog,
      installCatalog,
    );
    const labels = new PriceLabels(f2, (cents) => `EUR ${euros(cents)}`, hold);
    f2.registerReadmodel(labels);
    await f2.start(); // resumes from its checkpoint (3): nothing to do, the old labels stay
    const before = await labels.labelOf("sku-1");

    // An operator (administrators only with an authorizer; here trusted code) starts the rebuild.
    const rebuilt = f2.runtime.controlEventHandler({ eventHandlerName: "PriceLabels", action: "restore", restoreFromZero: true });
    await atHold;
    const during = await labels.labelOf("sku-1"); // the served generation: "9.99" (the new one has "EUR 9.99")
    const listing = await f2.query(ListEventHandlers, {}, { reqCtx: operator });
    const progress = listing.find((h) => h.eventHandlerName === "PriceLabels")?.restoration;
    const secondRestore = await f2.runtime
      .controlEventHandler({ eventHandlerName: "PriceLabels", action: "restore", restoreFromZero: true })
      .then(
        () => "ok",
        (e: unknown) => (isMnemeError(e) ? e.code : "not a MnemeError"),
      ); // INVALID_STATE: one at a time
    resume();
    const info = await rebuilt; // resolves after the switch
    const after = await labels.labelOf("sku-1");
    await f2.stop();
    return { before, during, progress, secondRestore, after, replayed: `${info.restorationState} at ${info.lastPosition}` };
  } finally {
    ws.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await main());
