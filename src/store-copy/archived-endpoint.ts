import type { ArchivedRange } from "../event-archive/archive-index.js";
import { ArchiveReader, type ArchiveReaderOptions } from "../event-archive/archive-reader.js";
import { archivedChain } from "../event-archive/archived-reads.js";
import type { ChainRow } from "../store/event-chain.js";
import type { CopyEndpoint } from "./copy-endpoint.js";
import type { CopyRow, CopyTable } from "./copy-tables.js";

/**
 * A source side whose archived events (`mneme store archive`) are read from
 * their files as if they were in its events table: `count`, `rows` and
 * `readChain` of the events merge the archive's rows in position order (every
 * file checked against its SHA-256), so `store copy` of an archived store
 * copies every event and `store verify` checks the chain across the files
 * and the database. The ranges are read in the side's snapshot.
 */
export function withArchivedEvents(side: CopyEndpoint, opts: ArchiveReaderOptions = {}): CopyEndpoint {
  let ranges: Promise<ArchivedRange[]> | undefined;
  const rangesOf = (): Promise<ArchivedRange[]> => (ranges ??= side.archivedRanges());
  const reader = new ArchiveReader(opts);
  const chain = archivedChain((o) => side.readChain(o), rangesOf, opts);
  return {
    description: side.description,
    beginSnapshot: () => side.beginSnapshot(),
    hasTable: (name) => side.hasTable(name),
    storeFormat: () => side.storeFormat(),
    count: async (table) => {
      const n = await side.count(table);
      if (table.name !== "events") return n;
      return n + (await rangesOf()).reduce((sum, r) => sum + r.events, 0);
    },
    rows: (table, pageSize) => (table.name === "events" ? mergedRows(side, table, pageSize, rangesOf, reader) : side.rows(table, pageSize)),
    readChain: (o) => chain(o ?? {}),
    archivedRanges: rangesOf,
    sqlTableReadmodels: () => side.sqlTableReadmodels(),
    createTables: () => side.createTables(),
    readMarker: () => side.readMarker(),
    writeMarker: (m) => side.writeMarker(m),
    readProgress: () => side.readProgress(),
    insert: (table, rows, progress) => side.insert(table, rows, progress),
    dropForgottenKeys: (ids) => side.dropForgottenKeys(ids),
    writeStoreFormat: (r) => side.writeStoreFormat(r),
    afterRows: () => side.afterRows(),
    close: () => side.close(),
  };
}

/** An archived row as the events table's CopyRow (numbers as decimal text, JSON as stored). */
function copyRow(r: ChainRow): CopyRow {
  return [
    String(r.position),
    r.eventUuid,
    r.tenantUuid,
    r.domain,
    r.name,
    r.aggregateUuid,
    String(r.version),
    r.commandUuid,
    r.createdAt,
    r.reqCtx,
    r.payload,
    String(r.eventVersion),
  ];
}

async function* mergedRows(
  side: CopyEndpoint,
  table: CopyTable,
  pageSize: number,
  rangesOf: () => Promise<ArchivedRange[]>,
  reader: ArchiveReader,
): AsyncIterable<CopyRow[]> {
  const ranges = await rangesOf();
  if (ranges.length === 0) {
    yield* side.rows(table, pageSize);
    return;
  }
  function* archived(): Generator<ChainRow> {
    for (const range of ranges) {
      const n = reader.manifest(range).segments.length;
      for (let i = 0; i < n; i++) yield* reader.segmentRows(range, i);
    }
  }
  const files = archived();
  let next = files.next();
  let out: CopyRow[] = [];
  const flush = function* (): Generator<CopyRow[]> {
    if (out.length >= pageSize) {
      yield out;
      out = [];
    }
  };
  for await (const page of side.rows(table, pageSize)) {
    for (const row of page) {
      const position = Number(row[0]);
      while (next.done !== true && next.value.position < position) {
        out.push(copyRow(next.value));
        next = files.next();
        yield* flush();
      }
      out.push(row);
      yield* flush();
    }
  }
  while (next.done !== true) {
    out.push(copyRow(next.value));
    next = files.next();
    yield* flush();
  }
  if (out.length > 0) yield out;
}
