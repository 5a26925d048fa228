/**
 * The Idempotency-Key header over node:http (both of toNodeListener's paths):
 * a retried POST of a command replays the recorded outcome (same commandUuid and
 * events, `replayed: true`, header Idempotent-Replayed), keys are kept per
 * account so two users' keys never meet, the same key with another body is
 * 409 CONFLICT, and a malformed key or an anonymous caller is 400.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newUuid, type Facade } from "mneme";
import { commandUuidOfIdempotencyKey } from "../../src/http/idempotency-key.js";
import { ADMIN, TENANT_A, USER, call, HTTP_PATHS, serve, startFacade, type TestServer } from "../support/http-fixture.js";

describe.each(HTTP_PATHS)("Idempotency-Key, %s path", (httpPath) => {
  let facade: Facade;
  let srv: TestServer;
  const create = `/api/tenants/${TENANT_A}/commands/Todo/CreateTodo`;

  beforeAll(async () => {
    facade = await startFacade();
    srv = await serve(facade, {}, httpPath);
  });
  afterAll(async () => {
    await srv.close();
    await facade.stop();
  });

  const post = (headers: Record<string, string>, body: unknown) => call(srv.url, "POST", create, { headers, body });

  it("replays a retried command: same commandUuid and events, nothing appended twice", async () => {
    const todoUuid = newUuid();
    const first = await post({ ...USER.headers, "idempotency-key": "order-42" }, { todoUuid, title: "buy milk" });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.replayed).toBeUndefined();
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const head = await facade.eventRepository.headPosition();

    const retry = await post({ ...USER.headers, "idempotency-key": "order-42" }, { todoUuid, title: "buy milk" });
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ commandUuid: first.body.commandUuid, replayed: true });
    expect(retry.body.events.map((e: { eventUuid: string }) => e.eventUuid)).toEqual(
      first.body.events.map((e: { eventUuid: string }) => e.eventUuid),
    );
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(await facade.eventRepository.headPosition()).toBe(head);
  });

  it("keeps keys per account: another user's same key is another command", async () => {
    const mine = await post({ ...USER.headers, "idempotency-key": "shared-key" }, { todoUuid: newUuid(), title: "mine" });
    const theirs = await post({ ...ADMIN.headers, "idempotency-key": "shared-key" }, { todoUuid: newUuid(), title: "theirs" });
    expect([mine.status, theirs.status]).toEqual([200, 200]);
    expect(theirs.body.commandUuid).not.toBe(mine.body.commandUuid);
    expect(theirs.body.replayed).toBeUndefined();
  });

  it("refuses the same key with another body (409), a malformed key and an anonymous caller (400)", async () => {
    const todoUuid = newUuid();
    expect((await post({ ...USER.headers, "idempotency-key": "k-1" }, { todoUuid, title: "one" })).status).toBe(200);
    const other = await post({ ...USER.headers, "idempotency-key": "k-1" }, { todoUuid, title: "two" });
    expect([other.status, other.body.code]).toEqual([409, "CONFLICT"]);
    const bad = await post({ ...USER.headers, "idempotency-key": "x".repeat(256) }, { todoUuid: newUuid(), title: "t" });
    expect([bad.status, bad.body.code]).toEqual([400, "INVALID_REQUEST"]);
  });
});

describe("the commandUuid of an Idempotency-Key", () => {
  it("is a uuid v8 fixed by account and key, and refuses anonymous callers and malformed keys", async () => {
    const a = await commandUuidOfIdempotencyKey("k", { senderAccountUuid: "acc-1" });
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await commandUuidOfIdempotencyKey("k", { senderAccountUuid: "acc-1", senderTenantUuid: "t" })).toBe(a);
    expect(await commandUuidOfIdempotencyKey("k", { senderAccountUuid: "acc-2" })).not.toBe(a);
    expect(await commandUuidOfIdempotencyKey("k2", { senderAccountUuid: "acc-1" })).not.toBe(a);
    expect(await commandUuidOfIdempotencyKey(null, {})).toBeUndefined();
    await expect(commandUuidOfIdempotencyKey("k", {})).rejects.toMatchObject({
      code: "INVALID_REQUEST",
      message: expect.stringMatching(/signed-in/),
    });
    await expect(commandUuidOfIdempotencyKey("caf\u00e9", { senderAccountUuid: "a" })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    await expect(commandUuidOfIdempotencyKey("", { senderAccountUuid: "a" })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
  });
});
