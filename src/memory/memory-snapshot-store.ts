import type { NewSnapshotRecord, SnapshotRecord, SnapshotStore } from "../store/snapshot-store.js";
import { validateSnapshot, validateSnapshotDelete, validateSnapshotKey } from "../store/snapshot-store.js";
import type { StoreInfo } from "../store/store-info.js";
import { storeClosed } from "../store/store-closed.js";

interface Slot {
  tenantUuid: string;
  version: number;
  createdAt: number;
  /** The state as JSON: a copy nobody else holds, parsed anew for every read. */
  stateJson: string;
  digest: string | null;
}

/**
 * The in-memory SnapshotStore: one snapshot per aggregate and snapshotVersion,
 * replaced only by a higher version. States are serialised on save and parsed
 * on every read, so neither the saved object nor a returned one reaches what is stored.
 */
export class MemorySnapshotStore implements SnapshotStore {
  /** By aggregate type (`[domain, aggregate]` as JSON), then by aggregateUuid, then by snapshotVersion. */
  private readonly types = new Map<string, Map<string, Map<number, Slot>>>();
  private closed = false;

  async init(): Promise<void> {
    this.assertOpen();
  }

  async save<S>(snapshot: NewSnapshotRecord<S>): Promise<boolean> {
    this.assertOpen();
    const s = validateSnapshot(snapshot);
    const typeKey = JSON.stringify([s.domain, s.aggregate]);
    let aggregates = this.types.get(typeKey);
    if (aggregates === undefined) {
      aggregates = new Map();
      this.types.set(typeKey, aggregates);
    }
    let versions = aggregates.get(s.aggregateUuid);
    if (versions === undefined) {
      versions = new Map();
      aggregates.set(s.aggregateUuid, versions);
    }
    const stored = versions.get(s.snapshotVersion);
    if (stored !== undefined && stored.version >= s.version) return false;
    versions.set(s.snapshotVersion, {
      tenantUuid: s.tenantUuid,
      version: s.version,
      createdAt: s.createdAt,
      stateJson: s.stateJson,
      digest: s.digest,
    });
    return true;
  }

  async latest<S = unknown>(
    domain: string,
    aggregate: string,
    aggregateUuid: string,
    snapshotVersion: number,
  ): Promise<SnapshotRecord<S> | undefined> {
    this.assertOpen();
    validateSnapshotKey(domain, aggregate, aggregateUuid, snapshotVersion);
    const slot = this.types
      .get(JSON.stringify([domain, aggregate]))
      ?.get(aggregateUuid)
      ?.get(snapshotVersion);
    if (slot === undefined) return undefined;
    const record: SnapshotRecord<S> = {
      tenantUuid: slot.tenantUuid,
      domain,
      aggregate,
      aggregateUuid,
      version: slot.version,
      snapshotVersion,
      state: JSON.parse(slot.stateJson) as S,
      createdAt: slot.createdAt,
    };
    if (slot.digest !== null) record.digest = slot.digest;
    return record;
  }

  async delete(domain: string, aggregate: string, aggregateUuid: string): Promise<number> {
    this.assertOpen();
    validateSnapshotDelete(domain, aggregate, aggregateUuid);
    const aggregates = this.types.get(JSON.stringify([domain, aggregate]));
    const n = aggregates?.get(aggregateUuid)?.size ?? 0;
    aggregates?.delete(aggregateUuid);
    return n;
  }

  async deleteAggregateType(domain: string, aggregate: string, opts?: { exceptSnapshotVersion?: number }): Promise<number> {
    this.assertOpen();
    validateSnapshotDelete(domain, aggregate, undefined, opts);
    const typeKey = JSON.stringify([domain, aggregate]);
    const aggregates = this.types.get(typeKey);
    if (aggregates === undefined) return 0;
    const keep = opts?.exceptSnapshotVersion;
    let n = 0;
    for (const [uuid, versions] of aggregates) {
      const kept = keep === undefined ? undefined : versions.get(keep);
      n += versions.size - (kept === undefined ? 0 : 1);
      if (kept === undefined) aggregates.delete(uuid);
      else if (versions.size > 1) aggregates.set(uuid, new Map([[keep as number, kept]]));
    }
    if (aggregates.size === 0) this.types.delete(typeKey);
    return n;
  }

  async clear(): Promise<number> {
    this.assertOpen();
    const n = this.count();
    this.types.clear();
    return n;
  }

  async info(): Promise<StoreInfo> {
    this.assertOpen();
    let last = 0;
    for (const aggregates of this.types.values()) {
      for (const versions of aggregates.values()) for (const s of versions.values()) if (s.createdAt > last) last = s.createdAt;
    }
    return { storeType: "memory", numItems: this.count(), lastItemCreatedAt: last, connectionInfo: "memory" };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.types.clear();
  }

  private count(): number {
    let n = 0;
    for (const aggregates of this.types.values()) for (const versions of aggregates.values()) n += versions.size;
    return n;
  }

  private assertOpen(): void {
    if (this.closed) throw storeClosed("MemorySnapshotStore");
  }
}
