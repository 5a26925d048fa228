/**
 * `facade.indexEventTags()`: the tag index rows of events stored before their
 * type declared `tags` (or written by instances that did not declare them),
 * computed from each event as handlers read it (current version, personal
 * fields opened) by its type's `tags` function, with the append's checks,
 * and added where they are missing. Resumable and idempotent: rows present
 * already are left as they are, so it may run again, or beside live appends.
 */
import { MnemeError } from "../model/errors.js";
import type { EventType } from "../model/tokens.js";
import type { EventRepository } from "../store/event-repository.js";
import type { TagIndexEntry } from "../store/event-tags.js";
import { eventTags } from "./append.js";

/** Options of `facade.indexEventTags`. */
export interface IndexEventTagsOptions {
  /** Events read per page (and index rows written per transaction). Default 1000. */
  readonly batchSize?: number;
}

/** What `facade.indexEventTags` did: the events it read and the index rows it added. */
export interface IndexEventTagsReport {
  readonly eventsRead: number;
  readonly taggedEvents: number;
  readonly rowsAdded: number;
}

/** What the backfill needs of the facade. */
export interface TagIndexHost {
  /** The event store as handlers read it (its `stored` repository writes the rows). */
  readonly events: EventRepository & { readonly stored: EventRepository };
  eventType(path: string): EventType | undefined;
}

/** See the file's head. A tags function that fails, or a tag the append would refuse, is INVALID_EVENTS naming the position. */
export async function indexEventTags(host: TagIndexHost, opts: IndexEventTagsOptions = {}): Promise<IndexEventTagsReport> {
  const stored = host.events.stored;
  if (stored.storesTags !== true || stored.indexTags === undefined) {
    throw new MnemeError("INVALID_STATE", "indexEventTags: the event repository stores no event tags");
  }
  const batchSize = opts.batchSize ?? 1000;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new MnemeError("INVALID_REQUEST", `indexEventTags: batchSize must be a positive integer, got ${String(batchSize)}`);
  }
  let eventsRead = 0;
  let taggedEvents = 0;
  let rowsAdded = 0;
  for await (const page of host.events.readAll({ batchSize })) {
    eventsRead += page.length;
    const entries: TagIndexEntry[] = [];
    for (const e of page) {
      const type = host.eventType(`${e.domain}.${e.name}`);
      if (type?.tags === undefined) continue;
      let tags: readonly string[];
      try {
        tags = eventTags(type, e.payload, 0);
      } catch (err) {
        throw new MnemeError(
          "INVALID_EVENTS",
          `indexEventTags: the event at position ${e.position} (${type.path}): ${(err as Error).message}`,
          {
            cause: err,
          },
        );
      }
      entries.push({ position: e.position, tenantUuid: e.tenantUuid, type: type.path, tags });
    }
    taggedEvents += entries.length;
    if (entries.length > 0) rowsAdded += await stored.indexTags(entries);
  }
  return { eventsRead, taggedEvents, rowsAdded };
}
