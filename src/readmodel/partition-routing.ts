import { MnemeError } from "../model/errors.js";

/** The largest partition count `withPartitions` accepts. */
export const MAX_PARTITIONS = 256;

const encoder = new TextEncoder();

/**
 * The partition of an aggregate's events among `count` partitions: the 32-bit
 * FNV-1a hash of the UTF-8 bytes of `aggregateUuid` (offset basis 2166136261,
 * prime 16777619), modulo `count`. Fixed: every process of every release
 * routes an aggregate to the same partition, so each aggregate's events are
 * applied by one partition, in order. Documented in docs/readmodels.md.
 * @internal
 */
export function partitionOf(aggregateUuid: string, count: number): number {
  let h = 2166136261;
  for (let i = 0; i < aggregateUuid.length; i++) {
    const c = aggregateUuid.charCodeAt(i);
    if (c < 0x80) {
      h = Math.imul(h ^ c, 16777619);
    } else {
      // Outside ASCII (uuids never are): hash the UTF-8 bytes of the rest.
      for (const b of encoder.encode(aggregateUuid.slice(i))) h = Math.imul(h ^ b, 16777619);
      break;
    }
  }
  return (h >>> 0) % count;
}

/** The checkpoint and lock key of partition `index` of `handler`. */
export function partitionKey(handler: string, index: number): string {
  return `${handler}#p${index}`;
}

/** The key of the record of a handler's partition count (kept as a checkpoint value). */
export function partitionCountKey(handler: string): string {
  return `${handler}#partitions`;
}

/** The key of member slot `index` of a partitioned handler: each live instance holds one (how instances count each other). */
export function memberKey(handler: string, index: number): string {
  return `${handler}#member${index}`;
}

/** Throws INVALID_REQUEST unless `n` is a partition count (an integer in 1..MAX_PARTITIONS). */
export function assertPartitionCount(n: unknown): asserts n is number {
  if (!Number.isInteger(n) || (n as number) < 1 || (n as number) > MAX_PARTITIONS)
    throw new MnemeError(
      "INVALID_REQUEST",
      `withPartitions: the partition count must be an integer in 1..${MAX_PARTITIONS}, got ${String(n)}`,
    );
}
