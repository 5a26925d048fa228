/**
 * The conformance tests of the optional rewrite the personal-data migration
 * uses: `EventRepository.sealStoredPayloads` and
 * `CommandStore.sealRecordPayloads` replace values stored in clear with
 * sealed envelopes in place, and refuse any other change. Skipped for a
 * store that does not offer them. Run inside the EventRepository and
 * CommandStore suites.
 */
import { expect } from "vitest";
import { newUuid, nowNs } from "../model/clock.js";
import type { CommandStore } from "../store/command-store.js";
import type { EventRepository } from "../store/event-repository.js";
import { collectPages, type ContractTest, expectRejectsWith } from "./contract-harness.js";

/** An envelope-shaped value (the stores check the shape, not the ciphertext). */
const envelope = (tag: string) => ({ $enc: `v1:${newUuid()}:aXY:${tag}` });

/** The event repository's sealing tests. */
export function describeEventPayloadSealingContract(test: ContractTest<EventRepository>): void {
  test("sealStoredPayloads: clear values become envelopes in place; ids, positions, versions and the rest stay", async (repo, ctx) => {
    if (repo.sealStoredPayloads === undefined) return ctx.skip("the repository offers no sealStoredPayloads (an optional capability)");
    const a = newUuid();
    const before = await repo.append([
      { domain: "Test", name: "Registered", aggregateUuid: a, payload: { email: "ivan@example.com", name: "Ivan", n: 1 } },
      { domain: "Test", name: "Other", aggregateUuid: a, payload: { n: 2 } },
    ]);
    const first = before[0]!;
    const sealed = { email: envelope("e"), name: envelope("n"), n: 1 };
    expect(await repo.sealStoredPayloads([{ id: first.eventUuid, stored: first.payload, sealed }])).toBe(1);
    const after = await repo.loadAggregate(a);
    expect(after[0]).toEqual({ ...first, payload: sealed });
    expect(after[1]).toEqual(before[1]);
    const all = (await collectPages(repo.readAll())).flat();
    expect(all.map((e) => [e.eventUuid, e.position, e.version])).toEqual(before.map((e) => [e.eventUuid, e.position, e.version]));
    expect(JSON.stringify(all)).not.toContain("ivan@example.com");
    // Again with the payload as first read: it moved meanwhile, so nothing is written twice.
    expect(
      await repo.sealStoredPayloads([{ id: first.eventUuid, stored: first.payload, sealed: { ...sealed, name: envelope("x") } }]),
    ).toBe(0);
    expect((await repo.loadAggregate(a))[0]?.payload).toEqual(sealed);
    // Unknown ids are skipped.
    expect(await repo.sealStoredPayloads([{ id: newUuid(), stored: { v: "x" }, sealed: { v: envelope("v") } }])).toBe(0);
  });

  test("sealStoredPayloads refuses anything but sealing clear values (INVALID_REQUEST, nothing written)", async (repo, ctx) => {
    if (repo.sealStoredPayloads === undefined) return ctx.skip("the repository offers no sealStoredPayloads (an optional capability)");
    const a = newUuid();
    const [e] = await repo.append([{ domain: "Test", name: "Registered", aggregateUuid: a, payload: { email: "x@example.com", n: 1 } }]);
    const id = e!.eventUuid;
    const stored = e!.payload;
    const refused = [
      { email: "y@example.com", n: 1 }, // a value changed
      { email: envelope("e"), n: 2 }, // sealed, and another value changed
      { email: envelope("e") }, // a field removed
      { email: envelope("e"), n: 1, extra: true }, // a field added
      { email: "x@example.com", n: 1 }, // nothing sealed
      { email: { $enc: "v2:k:i:d" }, n: 1 }, // not an envelope
    ];
    for (const sealed of refused) await expectRejectsWith(() => repo.sealStoredPayloads!([{ id, stored, sealed }]), "INVALID_REQUEST");
    // A batch with one bad rewrite writes nothing.
    await expectRejectsWith(
      () =>
        repo.sealStoredPayloads!([
          { id, stored, sealed: { email: envelope("e"), n: 1 } },
          { id: newUuid(), stored: { a: 1 }, sealed: { a: 2 } },
        ]),
      "INVALID_REQUEST",
    );
    expect((await repo.loadAggregate(a))[0]?.payload).toEqual(stored);
  });
}

/** The command store's sealing tests. */
export function describeRecordPayloadSealingContract(test: ContractTest<CommandStore>): void {
  test("sealRecordPayloads: clear values become envelopes or [redacted] in place; the rest of the record stays", async (store, ctx) => {
    if (store.sealRecordPayloads === undefined) return ctx.skip("the store offers no sealRecordPayloads (an optional capability)");
    const rec = {
      commandUuid: newUuid(),
      domain: "Account",
      name: "RegisterAccount",
      tenantUuid: "t",
      reqCtx: { senderAccountUuid: "s" },
      payload: { email: "ivan@example.com", name: "Ivan", password: "[redacted]", n: 1 },
      status: "succeeded" as const,
      eventUuids: [newUuid()],
      createdAt: nowNs(),
      durationMicros: 5,
    };
    await store.record(rec);
    const sealed = { email: envelope("e"), name: "[redacted]", password: "[redacted]", n: 1 };
    expect(await store.sealRecordPayloads([{ id: rec.commandUuid, stored: rec.payload, sealed }])).toBe(1);
    expect(await store.get(rec.commandUuid)).toEqual({ ...rec, payload: sealed });
    expect(
      await store.sealRecordPayloads([{ id: rec.commandUuid, stored: rec.payload, sealed: { ...sealed, email: envelope("f") } }]),
    ).toBe(0);
    expect((await store.list()).items).toEqual([{ ...rec, payload: sealed }]);
    await expectRejectsWith(
      () => store.sealRecordPayloads!([{ id: rec.commandUuid, stored: sealed, sealed: { ...sealed, n: 2 } }]),
      "INVALID_REQUEST",
    );
    await expectRejectsWith(
      () => store.sealRecordPayloads!([{ id: rec.commandUuid, stored: sealed, sealed: { ...sealed, email: "[redacted]" } }]),
      "INVALID_REQUEST",
    );
    expect((await store.get(rec.commandUuid))?.payload).toEqual(sealed);
  });
}
