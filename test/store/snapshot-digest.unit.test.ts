/**
 * The snapshot digest: SHA-256 computed in plain JavaScript (checked against
 * node:crypto on block boundaries, multi-byte text and long input), over the
 * snapshot's parts with the state's keys sorted.
 */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { snapshotDigest } from "mneme/store";
import { sha256Hex } from "../../src/store/sha256.js";

describe("sha256Hex", () => {
  it("equals node:crypto's SHA-256 on block boundaries, multi-byte text and long input", () => {
    const inputs = ["", "abc", "ü€𝄞\u0000", "x".repeat(100_000)];
    for (let n = 50; n <= 130; n++) inputs.push("a".repeat(n));
    for (let i = 0; i < 50; i++)
      inputs.push(String.fromCharCode(...Array.from({ length: i * 7 }, (_, j) => 32 + ((i * 31 + j * 17) % 2000))));
    for (const s of inputs) expect(sha256Hex(s), JSON.stringify(s.slice(0, 20))).toBe(createHash("sha256").update(s, "utf8").digest("hex"));
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});

describe("snapshotDigest", () => {
  const parts = { tenantUuid: "t", domain: "D", aggregate: "A", aggregateUuid: "u", version: 3, snapshotVersion: 1 };
  it("does not depend on the order of object keys, at any depth", () => {
    expect(snapshotDigest({ ...parts, state: { a: 1, b: { c: [1, { d: 2, e: 3 }] } } })).toBe(
      snapshotDigest({ ...parts, state: { b: { c: [1, { e: 3, d: 2 }] }, a: 1 } }),
    );
  });
  it("changes with every part: tenant, names, uuid, version, snapshotVersion, state (an own __proto__ key included)", () => {
    const base = snapshotDigest({ ...parts, state: { n: 1 } });
    const variants = [
      { ...parts, tenantUuid: "" },
      { ...parts, domain: "E" },
      { ...parts, aggregate: "B" },
      { ...parts, aggregateUuid: "v" },
      { ...parts, version: 4 },
      { ...parts, snapshotVersion: 2 },
    ].map((p) => snapshotDigest({ ...p, state: { n: 1 } }));
    variants.push(snapshotDigest({ ...parts, state: { n: 2 } }), snapshotDigest({ ...parts, state: null }));
    variants.push(snapshotDigest({ ...parts, state: JSON.parse('{"n": 1, "__proto__": {"x": 1}}') as unknown }));
    expect(new Set([base, ...variants]).size).toBe(variants.length + 1);
  });
});
