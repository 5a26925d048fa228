/**
 * A small domain for the blue-green restore tests: items stocked with a
 * number, a projection of them and "Catalog", a readmodel of one document per
 * kept item whose label and filter a test changes before a restore from zero,
 * so the served generation and the new one differ and a reader can tell them apart.
 */
import { anonymous, BaseReadmodel, defineDomain, type Facade, type ReadmodelOption } from "mneme";

export const Shelf = defineDomain("Shelf", { description: "Stocked items for restore tests" });
export const Stocked = Shelf.event<{ n: number }>("Stocked");
export const Stock = Shelf.command<{ itemUuid: string; n: number }>("Stock", { permission: anonymous });
export const StockMany = Shelf.command<{ items: { itemUuid: string; n: number }[] }>("StockMany", { permission: anonymous });
export const Item = Shelf.aggregate<{ n: number }>("Item", {
  initialState: () => ({ n: 0 }),
  evolve: { Stocked: (s, p: { n: number }) => ({ n: s.n + p.n }) },
});
Shelf.handleCommand(Stock, (_ctx, _c, p) => [Stocked.create(p.itemUuid, { n: p.n })]);
Shelf.handleCommand(StockMany, (_ctx, _c, p) => p.items.map((i) => Stocked.create(i.itemUuid, { n: i.n })));

export interface CatalogDoc {
  itemUuid: string;
  n: number;
  label: string;
}

/** Resolves when `resolve` is called; for pausing a handler from a test. */
export interface Gate {
  readonly promise: Promise<void>;
  resolve(): void;
}

export function gate(): Gate {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * One document per stocked item that `keep` accepts, labelled with `label`.
 * During a restore, it throws on the event at `failAt`, and at `pauseAt`
 * opens `paused` and waits for `resume`.
 */
export class Catalog extends BaseReadmodel {
  label = "old";
  keep: (n: number) => boolean = () => true;
  failAt: number | undefined;
  pauseAt: number | undefined;
  paused = gate();
  resume = gate();

  constructor(facade: Facade, ...options: ReadmodelOption[]) {
    super(facade, ...options);
    this.domain = "Shelf";
    this.name = "Catalog";
    this.addDomainEventHandler(Stocked, async (ctx, e, p) => {
      if (ctx.restoring && e.position === this.failAt) throw new Error(`refusing position ${e.position}`);
      if (ctx.restoring && e.position === this.pauseAt) {
        this.paused.resolve();
        await this.resume.promise;
      }
      if (!this.keep(p.n)) return;
      await this.collection<CatalogDoc>("items").put(e.aggregateUuid, { itemUuid: e.aggregateUuid, n: p.n, label: this.label });
    });
  }

  /** What a reader sees: the count and the full list, read as two queries. */
  async read(): Promise<{ count: number; items: CatalogDoc[] }> {
    const items = this.collection<CatalogDoc>("items");
    // The count first, then the list (not both at once): if the list is of the generation served before a switch,
    // the count is too, so a reader of the old generation can expect its exact count whatever the timing.
    const count = await items.count();
    const list = await items.list({ limit: 100_000 });
    return { count, items: list };
  }
}
