/**
 * The keys a tenant move copies between shards (copyKeys): a key its target
 * shard marks forgotten is never written back, and a key the source shard
 * has forgotten since an earlier copy goes from the target too. A forgotten
 * subject's key never comes back, by any path.
 */
import { describe, expect, it } from "vitest";
import { newUuid } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { copyKeys, type ShardSide } from "../../src/shards/tenant-copy.js";
import { postgresScratch } from "../support/postgres-scratch.js";

const pg = postgresScratch("mneme_shard_keys");

async function shard(): Promise<ShardSide & { keys: ReturnType<typeof createPostgresBackends>["keyStore"] }> {
  const schema = pg.newSchema();
  const keys = createPostgresBackends({ pool: pg.pool, schema, pollIntervalMs: 0 }).keyStore;
  await keys.init();
  return { pool: pg.pool, schema, keys };
}

const keyBytes = () => crypto.getRandomValues(new Uint8Array(32));

/** Two shards, a subject keyed on the first, its key copied to the second. */
async function keyedAndCopied() {
  const [a, b] = [await shard(), await shard()];
  const subject = newUuid();
  const keyId = newUuid();
  await a.keys.ensureKey({ subject, keyId, key: keyBytes() });
  await copyKeys(a, b, [keyId]);
  expect((await b.keys.keyOf(subject))?.keyId).toBe(keyId);
  return { a, b, subject, keyId };
}

describe("copyKeys between shards", () => {
  it("does not write back a key its target marks forgotten", async () => {
    const { a, b, subject, keyId } = await keyedAndCopied();
    // The subject is forgotten on the target shard; a later move copies the same key ids again.
    expect(await b.keys.forget(subject)).toBe(1);
    await copyKeys(a, b, [keyId]);
    expect(await b.keys.keyOf(subject)).toBeUndefined();
    expect((await b.keys.keysById([keyId])).size).toBe(0);
  });

  it("deletes from the target a key the source has forgotten since it was copied", async () => {
    const { a, b, subject, keyId } = await keyedAndCopied();
    expect(await a.keys.forget(subject)).toBe(1);
    await copyKeys(a, b, [keyId]);
    expect(await b.keys.keyOf(subject)).toBeUndefined();
    // The forget's mark came along: the key id is never used again on the target either.
    const reused = await b.keys.ensureKey({ subject, keyId, key: keyBytes() }).catch((e: unknown) => e);
    expect((reused as { code?: string }).code).toBe("CONFLICT");
  });
});
