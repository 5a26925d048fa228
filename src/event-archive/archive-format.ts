import { createHash } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { MnemeError } from "../model/errors.js";
import type { ChainHead, ChainRow } from "../store/event-chain.js";

/**
 * The files of an event archive (see docs/operations.md, "Archiving old
 * events"). One archived range, the events of positions (fromPosition,
 * toPosition] that the archive moved out of the database, is one directory:
 *
 *     <archive dir>/range-<from+1>-<to>/manifest.json
 *     <archive dir>/range-<from+1>-<to>/events-<first>-<last>.jsonl.gz   (segments, in position order)
 *
 * A segment is gzip of JSON lines, one stored row per line, exactly as the
 * store keeps it (see {@link encodeRow}): payload and request context as
 * their stored JSON texts (ciphertext of personal fields included), the
 * chain hash, the tenant. The manifest names every segment with its
 * SHA-256, its row count and its position range, the chain link before the
 * range and the chain head of the range (the hash of its last archived
 * event); the database records the manifest's SHA-256, so a changed byte of
 * any file is found by the next read of it and by `mneme store verify`.
 */
export const ARCHIVE_FORMAT = "mneme-event-archive";
export const ARCHIVE_FORMAT_VERSION = 1;

/** One segment file of an archived range. */
export interface ArchiveSegment {
  readonly file: string;
  readonly firstPosition: number;
  readonly lastPosition: number;
  readonly events: number;
  readonly bytes: number;
  readonly sha256: string;
}

/** manifest.json of one archived range. */
export interface ArchiveManifest {
  readonly format: typeof ARCHIVE_FORMAT;
  readonly version: number;
  /** The store the events came from, in words (no credentials). */
  readonly store: string;
  /** The range: positions above `fromPosition` up to `toPosition` (inclusive); some stay in the database (see docs). */
  readonly fromPosition: number;
  readonly toPosition: number;
  /** Events in the files. */
  readonly events: number;
  /** The hash of the last archived event (the chain head at the range's end in the files). */
  readonly chainHead: ChainHead;
  readonly segments: readonly ArchiveSegment[];
  /** ISO time the files were written. */
  readonly createdAt: string;
}

/** The directory name of the range (from, to]. */
export function rangeDirectoryName(fromPosition: number, toPosition: number): string {
  return `range-${fromPosition + 1}-${toPosition}`;
}

/** One row as a JSON line: [position, hash, event uuid, tenant, domain, name, aggregate uuid, version, command uuid, created at, event version, req ctx, payload]. */
export function encodeRow(r: ChainRow): string {
  return JSON.stringify([
    r.position,
    r.hash,
    r.eventUuid,
    r.tenantUuid,
    r.domain,
    r.name,
    r.aggregateUuid,
    r.version,
    r.commandUuid,
    r.createdAt,
    r.eventVersion,
    r.reqCtx,
    r.payload,
  ]);
}

type EncodedRow = [number, string, string, string, string, string, string, number, string | null, string, number, string, string | null];

function decodeRow(line: string, where: string): ChainRow {
  let a: EncodedRow;
  try {
    a = JSON.parse(line) as EncodedRow;
  } catch (e) {
    throw new MnemeError("STORE_ERROR", `event archive: ${where} holds a line that is not JSON`, { cause: e });
  }
  if (!Array.isArray(a) || a.length !== 13 || typeof a[0] !== "number" || typeof a[1] !== "string") {
    throw new MnemeError("STORE_ERROR", `event archive: ${where} holds a line that is not an archived event`);
  }
  return {
    position: a[0],
    hash: a[1],
    eventUuid: a[2],
    tenantUuid: a[3],
    domain: a[4],
    name: a[5],
    aggregateUuid: a[6],
    version: a[7],
    commandUuid: a[8],
    createdAt: a[9],
    eventVersion: a[10],
    reqCtx: a[11],
    payload: a[12],
  };
}

/** SHA-256 hex of bytes. */
export function sha256Bytes(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function writeFileSynced(path: string, bytes: Uint8Array): void {
  const fd = openSync(path, "w");
  try {
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function fsyncDirectory(path: string): void {
  try {
    const fd = openSync(path, "r");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Some filesystems refuse to open a directory for fsync; the files themselves are fsynced.
  }
}

/** Writes the segments of one range as they come, fsynced; `finish` writes the manifest and moves the directory into place. */
export class ArchiveRangeWriter {
  readonly #dir: string;
  readonly #tmp: string;
  readonly #final: string;
  readonly #from: number;
  readonly #to: number;
  readonly #store: string;
  readonly #segments: ArchiveSegment[] = [];
  #events = 0;
  #head: ChainHead | undefined;

  constructor(archiveDir: string, fromPosition: number, toPosition: number, store: string) {
    this.#dir = archiveDir;
    this.#from = fromPosition;
    this.#to = toPosition;
    this.#store = store;
    const name = rangeDirectoryName(fromPosition, toPosition);
    this.#final = join(archiveDir, name);
    this.#tmp = join(archiveDir, `${name}.partial`);
    mkdirSync(archiveDir, { recursive: true });
    // What a killed earlier run left half written is not referenced by the database: it is written again.
    rmSync(this.#tmp, { recursive: true, force: true });
    mkdirSync(this.#tmp);
  }

  /** The directory the range ends up in. */
  get directory(): string {
    return this.#final;
  }

  /** Writes one segment (rows in position order, at least one). */
  writeSegment(rows: readonly ChainRow[]): void {
    const first = rows[0]!.position;
    const last = rows[rows.length - 1]!.position;
    const file = `events-${first}-${last}.jsonl.gz`;
    const bytes = gzipSync(Buffer.from(rows.map(encodeRow).join("\n") + "\n", "utf8"), { level: 6 });
    writeFileSynced(join(this.#tmp, file), bytes);
    this.#segments.push({
      file,
      firstPosition: first,
      lastPosition: last,
      events: rows.length,
      bytes: bytes.length,
      sha256: sha256Bytes(bytes),
    });
    this.#events += rows.length;
    const tail = rows[rows.length - 1]!;
    this.#head = { position: tail.position, hash: tail.hash ?? "" };
  }

  /**
   * Writes manifest.json (fsynced), then replaces any unreferenced directory of the same range and renames
   * the partial directory into place. Returns the manifest and its SHA-256.
   */
  finish(): { manifest: ArchiveManifest; sha256: string } {
    if (this.#head === undefined) throw new MnemeError("INVALID_REQUEST", "event archive: a range without events");
    const manifest: ArchiveManifest = {
      format: ARCHIVE_FORMAT,
      version: ARCHIVE_FORMAT_VERSION,
      store: this.#store,
      fromPosition: this.#from,
      toPosition: this.#to,
      events: this.#events,
      chainHead: this.#head,
      segments: this.#segments,
      createdAt: new Date().toISOString(),
    };
    const bytes = Buffer.from(JSON.stringify(manifest, null, 2) + "\n", "utf8");
    writeFileSynced(join(this.#tmp, "manifest.json"), bytes);
    fsyncDirectory(this.#tmp);
    rmSync(this.#final, { recursive: true, force: true });
    renameSync(this.#tmp, this.#final);
    fsyncDirectory(this.#dir);
    return { manifest, sha256: sha256Bytes(bytes) };
  }

  /** Removes what was written (a refused or failed archive). */
  abandon(): void {
    rmSync(this.#tmp, { recursive: true, force: true });
  }
}

/** Reads and checks a range's manifest against the SHA-256 the database recorded. */
export function readManifest(directory: string, expectedSha256: string | undefined): ArchiveManifest {
  const path = join(directory, "manifest.json");
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new MnemeError(
      "STORE_ERROR",
      `event archive: ${path} cannot be read (${(e as Error).message}); the archived events are missing: ` +
        "put the archive back, or point the engine's archiveDirectory option at where it was moved",
      { cause: e },
    );
  }
  const sha = sha256Bytes(bytes);
  if (expectedSha256 !== undefined && sha !== expectedSha256) {
    throw new MnemeError(
      "STORE_ERROR",
      `event archive: ${path} is not the manifest the store recorded (SHA-256 ${sha}, recorded ${expectedSha256})`,
    );
  }
  let manifest: ArchiveManifest;
  try {
    manifest = JSON.parse(bytes.toString("utf8")) as ArchiveManifest;
  } catch (e) {
    throw new MnemeError("STORE_ERROR", `event archive: ${path} is not JSON`, { cause: e });
  }
  if (manifest.format !== ARCHIVE_FORMAT || manifest.version !== ARCHIVE_FORMAT_VERSION || !Array.isArray(manifest.segments)) {
    throw new MnemeError("STORE_ERROR", `event archive: ${path} is not a manifest of format ${ARCHIVE_FORMAT} ${ARCHIVE_FORMAT_VERSION}`);
  }
  return manifest;
}

/** Reads one segment, checking its SHA-256 and its rows against the manifest. */
export function readSegment(directory: string, segment: ArchiveSegment): ChainRow[] {
  const path = join(directory, segment.file);
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new MnemeError(
      "STORE_ERROR",
      `event archive: ${path} cannot be read (${(e as Error).message}); the archived events are missing`,
      {
        cause: e,
      },
    );
  }
  const sha = sha256Bytes(bytes);
  if (sha !== segment.sha256) {
    throw new MnemeError("STORE_ERROR", `event archive: ${path} was changed (SHA-256 ${sha}, the manifest says ${segment.sha256})`);
  }
  let text: string;
  try {
    text = gunzipSync(bytes).toString("utf8");
  } catch (e) {
    throw new MnemeError("STORE_ERROR", `event archive: ${path} is not gzip`, { cause: e });
  }
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const rows = lines.map((l) => decodeRow(l, path));
  let previous = segment.firstPosition - 1;
  for (const r of rows) {
    if (r.position <= previous || r.position > segment.lastPosition) {
      throw new MnemeError("STORE_ERROR", `event archive: ${path} holds position ${r.position} out of order`);
    }
    previous = r.position;
  }
  if (rows.length !== segment.events || rows[0]?.position !== segment.firstPosition || previous !== segment.lastPosition) {
    throw new MnemeError("STORE_ERROR", `event archive: ${path} does not hold the ${segment.events} events its manifest lists`);
  }
  return rows;
}
