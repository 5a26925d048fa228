import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, stat, unlink } from "node:fs/promises";
import { join, resolve } from "node:path";
import { nowNs } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import { assertDataKey, dataToStore } from "../store/data-key.js";
import { storeClosed } from "../store/store-closed.js";
import type { DataEntry, DataEntryInfo, DataStore } from "../store/data-store.js";
import { encodeCursor, keyPage } from "../store/paging.js";
import type { PageRequest, StoreInfo, StorePage } from "../store/store-info.js";

/** Options of {@link FilesystemDataStore}. */
export interface FilesystemDataStoreOptions {
  /** Directory that holds the store (created by init()). */
  readonly rootDir: string;
  /** fsync each file before it is published (default true): a put that resolved survives a power cut. */
  readonly fsync?: boolean;
}

/** The sidecar of one entry; the entry exists exactly when its sidecar does. */
interface Meta extends DataEntryInfo {
  /** File name of the blob under blobs/ (a new one per put). */
  blob: string;
}

/** Longest encoded key used as a file name; longer keys use a hash (file names end at 255 bytes). */
const MAX_NAME = 200;
/** Leftovers of crashed writers older than this are removed by init(). */
const STALE_MS = 60 * 60 * 1000;

/**
 * A DataStore on the local filesystem: each blob is a file under
 * `<rootDir>/blobs/`, its metadata a JSON sidecar under `<rootDir>/meta/`.
 * Both are written to `<rootDir>/tmp/` and renamed into place; the sidecar's
 * rename is the commit, so a reader never sees a half-written blob. File names
 * encode the key (lowercase letters, digits, "-", "_" and inner "." kept,
 * everything else %XX), so "a" and "A", or "a" and "a/b", never collide, also on
 * case-insensitive filesystems; long keys use a SHA-256 name.
 * Writes to one key are serialised within a process; several processes may
 * share a directory, the last rename winning.
 */
export class FilesystemDataStore implements DataStore {
  private readonly root: string;
  private readonly metaDir: string;
  private readonly blobDir: string;
  private readonly tmpDir: string;
  private readonly fsync: boolean;
  private readonly keyLocks = new Map<string, Promise<void>>();
  private closed = false;

  constructor(opts: FilesystemDataStoreOptions) {
    if (typeof opts?.rootDir !== "string" || opts.rootDir === "") {
      throw new MnemeError("INVALID_REQUEST", "FilesystemDataStore needs a rootDir");
    }
    this.root = resolve(opts.rootDir);
    this.metaDir = join(this.root, "meta");
    this.blobDir = join(this.root, "blobs");
    this.tmpDir = join(this.root, "tmp");
    this.fsync = opts.fsync ?? true;
  }

  async init(): Promise<void> {
    this.assertOpen();
    try {
      for (const d of [this.metaDir, this.blobDir, this.tmpDir]) await mkdir(d, { recursive: true });
      await this.removeStaleFiles();
    } catch (e) {
      throw fsError(`cannot initialise ${this.root}`, e);
    }
  }

  async put(key: string, data: Uint8Array | string, opts?: { contentType?: string }): Promise<DataEntryInfo> {
    this.assertOpen();
    assertDataKey(key);
    const { bytes, contentType } = dataToStore(data, opts?.contentType);
    const name = fileNameOf(key);
    return this.withKeyLock(key, async () => {
      this.assertOpen();
      const prev = await this.readMeta(name, key);
      const now = nowNs();
      const blob = `${name}.${randomBytes(12).toString("hex")}`;
      const meta: Meta = { key, size: bytes.byteLength, contentType, createdAt: prev?.createdAt ?? now, updatedAt: now, blob };
      await this.writeAtomically(join(this.blobDir, blob), bytes);
      try {
        await this.writeAtomically(join(this.metaDir, `${name}.json`), JSON.stringify(meta));
      } catch (e) {
        await unlinkQuietly(join(this.blobDir, blob));
        throw e;
      }
      if (prev !== undefined) await unlinkQuietly(join(this.blobDir, prev.blob));
      return infoOf(meta);
    });
  }

  async get(key: string): Promise<DataEntry | undefined> {
    this.assertOpen();
    assertDataKey(key);
    const name = fileNameOf(key);
    // A put or delete in another process may remove the blob between our two reads: read the sidecar again.
    for (let attempt = 0; attempt < 5; attempt++) {
      const meta = await this.readMeta(name, key);
      if (meta === undefined) return undefined;
      let buf: Buffer;
      try {
        buf = await readFile(join(this.blobDir, meta.blob));
      } catch (e) {
        if (isNotFound(e)) continue;
        throw fsError(`cannot read ${key}`, e);
      }
      return { ...infoOf(meta), data: new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength) };
    }
    throw new MnemeError("STORE_ERROR", `data entry ${key} kept changing while it was read`);
  }

  async delete(key: string): Promise<boolean> {
    this.assertOpen();
    assertDataKey(key);
    const name = fileNameOf(key);
    return this.withKeyLock(key, async () => {
      this.assertOpen();
      const meta = await this.readMeta(name, key);
      if (meta === undefined) return false;
      // Removing the sidecar is the commit; the blob goes afterwards.
      if (!(await unlinkQuietly(join(this.metaDir, `${name}.json`)))) return false;
      await unlinkQuietly(join(this.blobDir, meta.blob));
      return true;
    });
  }

  async list(opts: PageRequest & { prefix?: string } = {}): Promise<StorePage<DataEntryInfo>> {
    this.assertOpen();
    const { limit, after, prefix } = keyPage(opts);
    const candidates: { key: string; name: string }[] = [];
    for (const name of await this.metaNames()) {
      const key = name.startsWith("~") ? (await this.readMeta(name, undefined))?.key : keyOf(name);
      if (key === undefined || !key.startsWith(prefix) || (after !== undefined && key <= after)) continue;
      candidates.push({ key, name });
    }
    candidates.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const items: DataEntryInfo[] = [];
    for (const c of candidates) {
      const meta = await this.readMeta(c.name, c.key);
      if (meta === undefined) continue; // deleted meanwhile
      if (items.length === limit) return { items, nextCursor: encodeCursor([(items[items.length - 1] as DataEntryInfo).key]) };
      items.push(infoOf(meta));
    }
    return { items };
  }

  async info(): Promise<StoreInfo> {
    this.assertOpen();
    let numItems = 0;
    let last = 0;
    for (const name of await this.metaNames()) {
      const meta = await this.readMeta(name, undefined);
      if (meta === undefined) continue;
      numItems++;
      if (meta.createdAt > last) last = meta.createdAt;
    }
    return { storeType: "filesystem", numItems, lastItemCreatedAt: last, connectionInfo: `file://${this.root}` };
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private assertOpen(): void {
    if (this.closed) throw storeClosed("FilesystemDataStore");
  }

  /** Encoded names (without ".json") of every sidecar. */
  private async metaNames(): Promise<string[]> {
    try {
      return (await readdir(this.metaDir)).filter((f) => f.endsWith(".json")).map((f) => f.slice(0, -5));
    } catch (e) {
      throw fsError(`cannot list ${this.metaDir}`, e);
    }
  }

  /** The sidecar of `name`, or undefined when there is none (or, for a hashed name, it holds another key). */
  private async readMeta(name: string, key: string | undefined): Promise<Meta | undefined> {
    let text: string;
    try {
      text = await readFile(join(this.metaDir, `${name}.json`), "utf8");
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw fsError(`cannot read metadata ${name}`, e);
    }
    let meta: Meta;
    try {
      meta = JSON.parse(text) as Meta;
    } catch (e) {
      throw fsError(`corrupt metadata file ${name}.json`, e);
    }
    if (typeof meta?.key !== "string" || typeof meta.blob !== "string")
      throw new MnemeError("STORE_ERROR", `corrupt metadata file ${name}.json`);
    return key === undefined || meta.key === key ? meta : undefined;
  }

  private async writeAtomically(target: string, data: Uint8Array | string): Promise<void> {
    const tmp = join(this.tmpDir, `${randomBytes(12).toString("hex")}.tmp`);
    try {
      const fh = await open(tmp, "wx");
      try {
        await fh.writeFile(data);
        if (this.fsync) await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, target);
    } catch (e) {
      await unlinkQuietly(tmp);
      throw fsError(`cannot write ${target}`, e);
    }
  }

  private async withKeyLock<R>(key: string, fn: () => Promise<R>): Promise<R> {
    const prev = this.keyLocks.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const tail = prev.then(() => mine);
    this.keyLocks.set(key, tail);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      if (this.keyLocks.get(key) === tail) this.keyLocks.delete(key);
    }
  }

  /** Removes temp files and unreferenced blobs that crashed writers left, once they are old enough not to be in flight. */
  private async removeStaleFiles(): Promise<void> {
    const cutoff = Date.now() - STALE_MS;
    const old = async (path: string): Promise<boolean> => {
      try {
        return (await stat(path)).mtimeMs < cutoff;
      } catch {
        return false;
      }
    };
    for (const f of await readdir(this.tmpDir)) {
      const p = join(this.tmpDir, f);
      if (await old(p)) await unlinkQuietly(p);
    }
    for (const f of await readdir(this.blobDir)) {
      const name = f.slice(0, f.lastIndexOf("."));
      const p = join(this.blobDir, f);
      if (!(await old(p))) continue;
      const meta = await this.readMeta(name, undefined).catch(() => undefined);
      if (meta?.blob !== f) await unlinkQuietly(p);
    }
  }
}

function infoOf(m: DataEntryInfo): DataEntryInfo {
  return { key: m.key, size: m.size, contentType: m.contentType, createdAt: m.createdAt, updatedAt: m.updatedAt };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** The file name of a key: readable where safe, %XX (uppercase hex) elsewhere, a hash when too long. */
export function fileNameOf(key: string): string {
  let out = "";
  const bytes = encoder.encode(key);
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] as number;
    const keep =
      (b >= 0x61 && b <= 0x7a) || // a-z
      (b >= 0x30 && b <= 0x39) || // 0-9
      b === 0x2d || // -
      b === 0x5f || // _
      (b === 0x2e && i > 0); // "." but not first: no hidden files, no "." or ".."
    out += keep ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
    if (out.length > MAX_NAME) return `~${createHash("sha256").update(key).digest("hex")}`;
  }
  return out;
}

/** The key of a readable (not hashed) file name. */
function keyOf(name: string): string | undefined {
  const bytes: number[] = [];
  for (let i = 0; i < name.length; i++) {
    if (name[i] === "%") {
      bytes.push(Number.parseInt(name.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(name.charCodeAt(i));
  }
  try {
    return decoder.decode(new Uint8Array(bytes));
  } catch {
    return undefined; // not a file this store wrote
  }
}

function isNotFound(e: unknown): boolean {
  return (e as NodeJS.ErrnoException | null)?.code === "ENOENT";
}

/** Unlinks a file; true when it existed. */
async function unlinkQuietly(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (e) {
    if (isNotFound(e)) return false;
    throw fsError(`cannot remove ${path}`, e);
  }
}

function fsError(message: string, cause: unknown): MnemeError {
  return cause instanceof MnemeError ? cause : new MnemeError("STORE_ERROR", message, { cause });
}
