/**
 * The erasure of a forgotten subject's copies in a readmodel's collection
 * (`BaseReadmodel.eraseSubjects`): on `Privacy.SubjectForgotten`, the
 * subject's documents are found, erased and written back under their keys.
 * Each keeps its tenant (the event has none, and the readmodel stores keep the
 * tenant of a document a writer without one replaces) and, on a partitioned
 * readmodel, each partition erases only the documents of its own aggregates,
 * in order with the other events of that partition.
 */
import { MnemeError } from "../model/errors.js";
import type { HandlerContext } from "../model/event-handler.js";
import type { SubjectForgotten } from "../model/privacy-events.js";
import type { ListOptions, ReadmodelCollection } from "../store/readmodel-store-backend.js";
import { partitionOf } from "./partition-routing.js";
import { deleteKeys } from "./readmodel-generations.js";

/** How a readmodel finds and erases one subject's documents in a collection. */
export interface SubjectErasure<T> {
  /** The subject's documents, in every tenant: an equality filter on top-level fields, as `list`'s `where`. */
  where(subject: string): NonNullable<ListOptions["where"]>;
  /** The key a document is stored under. */
  keyOf(doc: T): string;
  /** The document with the subject's personal fields erased, or undefined to delete it. */
  erase(doc: T, subject: string): T | undefined;
  /**
   * On a partitioned readmodel: the aggregate whose events write the document
   * (the partition it routes to erases it). Default: `keyOf(doc)`.
   */
  aggregateOf?(doc: T): string;
}

/** Checks an erasure's shape at registration: INVALID_EVENT_HANDLER otherwise. */
export function assertSubjectErasure(readmodel: string, collection: unknown, erasure: unknown): void {
  const bad = (what: string) => new MnemeError("INVALID_EVENT_HANDLER", `readmodel ${readmodel}: eraseSubjects: ${what}`);
  const c = collection as Partial<ReadmodelCollection<unknown>> | null;
  if (typeof c !== "object" || c === null || typeof c.list !== "function" || typeof c.putMany !== "function")
    throw bad("the first argument must be one of the readmodel's collections (this.collection(name))");
  const e = erasure as Partial<SubjectErasure<unknown>> | null;
  if (typeof e !== "object" || e === null) throw bad("the erasure must be an object { where, keyOf, erase }");
  for (const f of ["where", "keyOf", "erase"] as const) if (typeof e[f] !== "function") throw bad(`${f} must be a function`);
  if (e.aggregateOf !== undefined && typeof e.aggregateOf !== "function") throw bad("aggregateOf must be a function");
}

/** The handler of `Privacy.SubjectForgotten` that erases the subject's documents of `collection` owned by the applying partition. */
export function subjectEraser<T>(
  collection: ReadmodelCollection<T>,
  erasure: SubjectErasure<T>,
): (ctx: HandlerContext, event: unknown, p: SubjectForgotten) => Promise<void> {
  return async (ctx, _event, p) => {
    const found = await collection.list({ where: erasure.where(p.subject) });
    const lane = ctx.partition;
    const owner = erasure.aggregateOf ?? erasure.keyOf;
    const puts: [string, T][] = [];
    const deletes: string[] = [];
    for (const doc of found) {
      if (lane !== undefined && partitionOf(owner(doc), lane.count) !== lane.index) continue;
      const key = erasure.keyOf(doc);
      if (typeof key !== "string" || key === "")
        throw new MnemeError("INVALID_EVENT_HANDLER", `eraseSubjects: keyOf returned ${JSON.stringify(key)}, not a document key`);
      const erased = erasure.erase(doc, p.subject);
      if (erased === undefined) deletes.push(key);
      else puts.push([key, erased]);
    }
    if (puts.length > 0) await collection.putMany(puts);
    if (deletes.length === 0) return;
    await deleteKeys(collection, deletes);
  };
}
