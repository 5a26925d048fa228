/**
 * docs/evolution.md, "Bad input and what it gives": mistakes in evolution
 * options are INVALID_DOMAIN when the domain is defined or registered; a
 * stored event that cannot be read as its current version is UPCAST_FAILED
 * and nothing is written; operator calls with bad arguments are refused with
 * their own codes. Stored events are trusted: an upcast payload is checked for
 * JSON safety only, not against the event's schema.
 * test/project/evolution-guide.int.test.ts runs it.
 */
import { createFacade, defineDomain, type DomainInstaller, isMnemeError } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";
import { reqCtx, workspace } from "./workspace.js";

/** The error code `fn` fails with, or "ok". */
async function codeOf(fn: () => unknown): Promise<string> {
  try {
    await fn();
    return "ok";
  } catch (e) {
    return isMnemeError(e) ? e.code : "not a MnemeError";
  }
}

interface Rated {
  stars: number;
}

function release1() {
  const Reviews = defineDomain("Reviews");
  const Rated = Reviews.event<{ score: number }>("Rated");
  const Rate = Reviews.command<{ reviewUuid: string; score: number }>("Rate");
  const install = (d: DomainInstaller): void => {
    d.handleCommand(Rate, (_ctx, _cmd, p) => [Rated.create(p.reviewUuid, { score: p.score })]);
  };
  return { Reviews, Rate, install };
}

/** Release 2 with an upcaster of your choice: the score (0..10) became stars (1..5). */
function release2(upcaster: (p: { score: number }) => unknown) {
  const Reviews = defineDomain("Reviews");
  const schema = { type: "object", properties: { stars: { type: "integer" } }, required: ["stars"], additionalProperties: false };
  const Rated = Reviews.event<Rated>("Rated", { version: 2, upcasters: { 1: upcaster }, schema });
  const Review = Reviews.aggregate<{ stars?: number }>("Review", {
    initialState: () => ({}),
    evolve: { Rated: (_s, p: Rated) => ({ stars: p.stars }) },
  });
  return { Reviews, Rated, Review };
}

export async function main(): Promise<Record<string, unknown>> {
  const D = defineDomain("Mistakes");
  D.event("Taken");
  const definitions = {
    "version 2 without upcasters[1]": await codeOf(() => D.event("A", { version: 2 })),
    "an upcaster for no older version": await codeOf(() => D.event("B", { version: 2, upcasters: { 1: (p) => p, 2: (p) => p } })),
    "renamedFrom an existing event": await codeOf(() => D.event("C", { renamedFrom: "Taken" })),
    "snapshotVersion 0": await codeOf(() => D.aggregate("S", { initialState: () => ({}), evolve: {}, snapshotVersion: 0 })),
    "an evolve key with a former name": await codeOf(() => {
      const Renamed = defineDomain("Renamed");
      Renamed.event("LoanStarted", { renamedFrom: "BookLent" });
      Renamed.aggregate("Book", { initialState: () => ({}), evolve: { BookLent: (s) => s } });
      createFacade().registerDomain(Renamed); // evolve keys are checked when the domain is registered
    }),
  };

  const ws = workspace("bad-input");
  try {
    const stores = () => createSqliteBackends({ filename: ws.filename });
    const r1 = release1();
    const f1 = createFacade({ appName: "reviews", ...stores() }).registerDomain(r1.Reviews, r1.install);
    await f1.start();
    await f1.dispatch(r1.Rate, { reviewUuid: "r-1", score: 7 }, { reqCtx });
    await f1.stop();

    const read = async (upcaster: (p: { score: number }) => unknown) => {
      const r2 = release2(upcaster);
      const f2 = createFacade({ appName: "reviews", ...stores() }).registerDomain(r2.Reviews);
      await f2.start();
      try {
        const code = await codeOf(() => f2.loadAggregate(r2.Review, "r-1"));
        return { code, state: code === "ok" ? (await f2.loadAggregate(r2.Review, "r-1")).state : undefined };
      } finally {
        await f2.stop();
      }
    };
    const reads = {
      "an upcaster that throws": (
        await read(() => {
          throw new Error("no such score");
        })
      ).code,
      "an upcaster that returns NaN": (await read(() => ({ stars: Number.NaN }))).code,
      // Not checked against the schema: this payload has no "stars", and it is read as it is.
      "an upcaster that breaks the schema": (await read((p) => ({ rating: p.score }))).state,
      "a correct upcaster": (await read((p) => ({ stars: Math.max(1, Math.round(p.score / 2)) }))).state,
    };

    const f = createFacade({ appName: "reviews", ...stores() }).registerDomain(release2((p) => p).Reviews);
    await f.start();
    const operations = {
      "restore an unknown handler": await codeOf(() =>
        f.runtime.controlEventHandler({ eventHandlerName: "Nope", action: "restore", restoreFromZero: true }),
      ),
      "restoreFromZero not a boolean": await codeOf(() =>
        f.runtime.controlEventHandler({ eventHandlerName: "Nope", action: "restore", restoreFromZero: "yes" as never }),
      ),
      "exceptSnapshotVersion 0": await codeOf(() => f.snapshotStore.deleteAggregateType("Reviews", "Review", { exceptSnapshotVersion: 0 })),
      "the event's schema": f.runtime.getSchema({ domain: "Reviews", type: "Rated" }).required,
    };
    await f.stop();
    return { ...definitions, ...reads, ...operations };
  } finally {
    ws.remove();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(await main());
