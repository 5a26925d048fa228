/**
 * runtime.stores: info / read / update / delete of the five stores, each
 * guarded by its <Store>.<Action> permission (authorizer only), failing before
 * registerStorePermissions, and audited in the LogStore.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  type Authorizer,
  type Facade,
  type Permission,
  type RequestContext,
  createFacade,
  defineDomain,
  newUuid,
  registerStorePermissions,
} from "mneme";
import { type LogEntry } from "mneme/store";
import { STORE_ACTIONS, STORE_NAMES, storePermissionName } from "mneme/runtime";
import { ADMIN, USER, type Rig, authorizer, startRig } from "./runtime-fixture.js";
import { rejection } from "../support/rejections.js";
import type { StoreAction, StoreName } from "mneme/types";

let rig: Rig | undefined;
const extra: Facade[] = [];
afterEach(async () => {
  await rig?.facade.stop();
  rig = undefined;
  for (const f of extra.splice(0)) await f.stop();
});

/** One call of each action on a store, with arguments that would succeed for an administrator where the store allows it. */
function op(f: Facade, store: StoreName, action: StoreAction, reqCtx: RequestContext): Promise<unknown> {
  const s = f.runtime.stores;
  switch (action) {
    case "Info":
      return s.info(store, reqCtx);
    case "Read":
      return s.read(store, reqCtx, { limit: 5 });
    case "Update":
      return s.update(store, reqCtx, "key-1", "value");
    case "Delete":
      return s.delete(store, reqCtx, store === "log" ? "1" : "key-1");
  }
}

const audits = async (f: Facade): Promise<LogEntry[]> => (await f.logStore.list({ source: "mneme.runtime.stores" })).items;

describe("guard", () => {
  it("every operation fails with STORE_PERMISSIONS_NOT_REGISTERED before registerStorePermissions, even for an administrator", async () => {
    rig = await startRig();
    expect(rig.facade.runtime.stores.permissionsRegistered).toBe(false);
    for (const store of STORE_NAMES) {
      for (const action of STORE_ACTIONS) {
        expect((await rejection(op(rig.facade, store, action, ADMIN))).code, `${store} ${action}`).toBe("STORE_PERMISSIONS_NOT_REGISTERED");
      }
    }
    expect(await audits(rig.facade)).toEqual([]);
  });

  it("a level alone never grants a store permission: without an authorizer a fully authorized sender is denied", async () => {
    const f = createFacade();
    extra.push(f);
    await f.start();
    registerStorePermissions(f);
    for (const store of STORE_NAMES) {
      for (const action of STORE_ACTIONS) {
        expect((await rejection(op(f, store, action, ADMIN))).code, `${store} ${action}`).toBe("PERMISSION_DENIED");
      }
    }
  });

  it("with the authorizer, a non-administrator is denied all 20 operations and nothing is written or audited", async () => {
    rig = await startRig();
    registerStorePermissions(rig.facade);
    await rig.facade.dataStore.put("key-1", "keep");
    await rig.facade.cacheStore.set("key-1", "keep");
    for (const store of STORE_NAMES) {
      for (const action of STORE_ACTIONS) {
        expect((await rejection(op(rig.facade, store, action, USER))).code, `${store} ${action}`).toBe("PERMISSION_DENIED");
      }
    }
    expect(new TextDecoder().decode((await rig.facade.dataStore.get("key-1"))!.data)).toBe("keep");
    expect(await rig.facade.cacheStore.get("key-1")).toBe("keep");
    expect(await audits(rig.facade)).toEqual([]);
  });

  it("the authorizer sees the exact <Store>.<Action> permission and can grant one action only", async () => {
    const asked: string[] = [];
    const only: Authorizer = (_ctx, p: Permission) => {
      asked.push(`${p.domain}.${p.type}`);
      return p.type === "StoreData.Read" ? undefined : new Error("no");
    };
    const f = createFacade({ authorizer: only });
    extra.push(f);
    await f.start();
    registerStorePermissions(f);
    await f.dataStore.put("a", "1");
    expect((await f.runtime.stores.read("data", ADMIN)).items.map((i) => (i as { key: string }).key)).toEqual(["a"]);
    expect((await rejection(f.runtime.stores.update("data", ADMIN, "a", "2"))).code).toBe("PERMISSION_DENIED");
    expect((await rejection(f.runtime.stores.read("cache", ADMIN))).code).toBe("PERMISSION_DENIED");
    expect(asked).toEqual(["Runtime.StoreData.Read", "Runtime.StoreData.Update", "Runtime.StoreCache.Read"]);
  });

  it("the permission names are <Store>.<Action>", () => {
    expect(STORE_NAMES.flatMap((s) => STORE_ACTIONS.map((a) => storePermissionName(s, a)))).toEqual([
      "StoreEvent.Info",
      "StoreEvent.Read",
      "StoreEvent.Update",
      "StoreEvent.Delete",
      "StoreCommand.Info",
      "StoreCommand.Read",
      "StoreCommand.Update",
      "StoreCommand.Delete",
      "StoreData.Info",
      "StoreData.Read",
      "StoreData.Update",
      "StoreData.Delete",
      "StoreCache.Info",
      "StoreCache.Read",
      "StoreCache.Update",
      "StoreCache.Delete",
      "StoreLog.Info",
      "StoreLog.Read",
      "StoreLog.Update",
      "StoreLog.Delete",
    ]);
  });

  it("INVALID_REQUEST for an unknown store (before the permission), a bad key, limit or cursor", async () => {
    rig = await startRig();
    registerStorePermissions(rig.facade);
    const s = rig.facade.runtime.stores;
    expect((await rejection(s.info("readmodel" as StoreName, ADMIN))).code).toBe("INVALID_REQUEST");
    expect((await rejection(s.info("readmodel" as StoreName, USER))).code).toBe("INVALID_REQUEST");
    expect((await rejection(s.update("data", ADMIN, "", "x"))).code).toBe("INVALID_REQUEST");
    expect((await rejection(s.update("data", ADMIN, "k".repeat(1025), "x"))).code).toBe("INVALID_REQUEST");
    expect((await rejection(s.read("log", ADMIN, { limit: 0 }))).code).toBe("INVALID_REQUEST");
    expect((await rejection(s.read("log", ADMIN, { limit: 1001 }))).code).toBe("INVALID_REQUEST");
    expect((await rejection(s.read("event", ADMIN, { cursor: "-3" }))).code).toBe("INVALID_REQUEST");
    expect((await rejection(s.update("data", ADMIN, "k", 42))).code).toBe("INVALID_REQUEST");
    expect((await rejection(s.update("cache", ADMIN, "k", { value: 1, ttlMs: -1 }))).code).toBe("INVALID_REQUEST");
    expect((await rejection(s.delete("log", ADMIN, "abc"))).code).toBe("INVALID_REQUEST");
  });
});

describe("allowed for an administrator", () => {
  it("info of every store", async () => {
    rig = await startRig();
    registerStorePermissions(rig.facade);
    await rig.place("o1");
    for (const store of STORE_NAMES) {
      const info = await rig.facade.runtime.stores.info(store, ADMIN);
      expect(info, store).toMatchObject({ storeType: "memory", connectionInfo: expect.any(String) });
    }
    expect(await rig.facade.runtime.stores.info("event", ADMIN)).toMatchObject({ numItems: 1 });
    expect(await rig.facade.runtime.stores.info("command", ADMIN)).toMatchObject({ numItems: 1 });
  });

  it("reads the event store in pages by position, without gaps or repeats", async () => {
    rig = await startRig();
    registerStorePermissions(rig.facade);
    for (let i = 1; i <= 7; i++) await rig.place(`o${i}`);
    const positions: number[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await rig.facade.runtime.stores.read("event", ADMIN, { limit: 3, ...(cursor === undefined ? {} : { cursor }) });
      positions.push(...page.items.map((e) => (e as { position: number }).position));
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== undefined && pages < 10);
    expect(positions).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(pages).toBe(3);
  });

  it("an event of a type with tags carries them in the event store's entries; others carry none", async () => {
    const f = createFacade({ authorizer });
    extra.push(f);
    const Courses = defineDomain("Courses");
    const Subscribe = Courses.command<{ studentId: string; courseId: string }>("Subscribe");
    const Note = Courses.command<{ text: string }>("Note");
    const Subscribed = Courses.event<{ studentId: string; courseId: string }>("Subscribed", {
      tags: (p) => [`student:${p.studentId}`, `course:${p.courseId}`],
    });
    const Noted = Courses.event<{ text: string }>("Noted");
    f.registerDomain(Courses, (d) => {
      d.handleCommand(Subscribe, (_ctx, _c, p) => [Subscribed.create(newUuid(), p)]);
      d.handleCommand(Note, (_ctx, _c, p) => [Noted.create(newUuid(), p)]);
    });
    await f.start();
    registerStorePermissions(f);
    await f.dispatch(Subscribe, { studentId: "s1", courseId: "c1" }, { reqCtx: USER });
    await f.dispatch(Note, { text: "hello" }, { reqCtx: USER });
    const page = await f.runtime.stores.read("event", ADMIN, { limit: 10 });
    const byName = new Map(page.items.map((e) => [(e as { name: string }).name, e as { tags?: string[] }]));
    expect(byName.get("Subscribed")?.tags).toEqual(["student:s1", "course:c1"]);
    expect(byName.get("Noted")).toBeDefined();
    expect(byName.get("Noted")).not.toHaveProperty("tags");
  });

  it("reads the command, log, data and cache stores in pages", async () => {
    rig = await startRig();
    registerStorePermissions(rig.facade);
    const f = rig.facade;
    for (let i = 1; i <= 5; i++) await rig.place(`o${i}`);
    for (let i = 1; i <= 5; i++) await f.logStore.append({ level: "info", message: `m${i}` });
    for (let i = 1; i <= 5; i++) await f.dataStore.put(`d${i}`, `v${i}`);
    for (let i = 1; i <= 5; i++) await f.cacheStore.set(`c${i}`, i);
    for (const store of ["command", "log", "data", "cache"] as const) {
      const all: unknown[] = [];
      let cursor: string | undefined;
      for (let n = 0; n < 10; n++) {
        const page = await f.runtime.stores.read(store, ADMIN, { limit: 2, ...(cursor === undefined ? {} : { cursor }) });
        expect(page.items.length).toBeLessThanOrEqual(2);
        all.push(...page.items);
        cursor = page.nextCursor;
        if (cursor === undefined) break;
      }
      expect(all, store).toHaveLength(5);
    }
  });

  it("update and delete of data and cache entries, each audited in the LogStore with who did it", async () => {
    rig = await startRig();
    registerStorePermissions(rig.facade);
    const f = rig.facade;
    const s = f.runtime.stores;
    expect(await s.update("data", ADMIN, "notes/a.txt", "hello")).toEqual({ key: "notes/a.txt" });
    expect(new TextDecoder().decode((await f.dataStore.get("notes/a.txt"))!.data)).toBe("hello");
    await s.update("data", ADMIN, "bin", { base64: Buffer.from([1, 2, 3]).toString("base64"), contentType: "application/octet-stream" });
    const bin = (await f.dataStore.get("bin"))!;
    expect([...bin.data]).toEqual([1, 2, 3]);
    expect(bin.contentType).toBe("application/octet-stream");
    await expect(s.update("data", ADMIN, "bad", { base64: "not base64!" })).rejects.toMatchObject({ code: "INVALID_REQUEST" });
    expect(await f.dataStore.get("bad")).toBeUndefined();
    await s.update("data", ADMIN, "page", { text: "<p>", contentType: "text/html" });
    expect((await f.dataStore.get("page"))!.contentType).toBe("text/html");
    await s.update("cache", ADMIN, "c", { value: { n: 1 }, ttlMs: 60_000 });
    expect(await f.cacheStore.get("c")).toEqual({ n: 1 });
    await s.update("cache", ADMIN, "raw", [1, 2]);
    expect(await f.cacheStore.get("raw")).toEqual([1, 2]);
    expect(await s.delete("data", ADMIN, "bin")).toEqual({ deleted: true });
    expect(await f.dataStore.get("bin")).toBeUndefined();
    expect(await s.delete("cache", ADMIN, "c")).toEqual({ deleted: true });
    expect(await f.cacheStore.get("c")).toBeUndefined();

    const log = await audits(f);
    expect(log.map((e) => e.message)).toEqual([
      "StoreData.Update notes/a.txt",
      "StoreData.Update bin",
      "StoreData.Update page",
      "StoreCache.Update c",
      "StoreCache.Update raw",
      "StoreData.Delete bin",
      "StoreCache.Delete c",
    ]);
    expect(log[0]).toMatchObject({
      level: "info",
      source: "mneme.runtime.stores",
      tenantUuid: "tenant-sys",
      data: { store: "data", action: "Update", key: "notes/a.txt", senderAccountUuid: "acc-admin", senderIdentityUuid: "idn-admin" },
    });
  });

  it("delete of command records and log entries is audited; deleting the audit entry itself leaves a new one", async () => {
    rig = await startRig();
    registerStorePermissions(rig.facade);
    const f = rig.facade;
    await rig.place("o1");
    const [cmd] = (await f.commandStore.list()).items;
    expect(await f.runtime.stores.delete("command", ADMIN, cmd!.commandUuid)).toEqual({ deleted: true });
    expect(await f.commandStore.get(cmd!.commandUuid)).toBeUndefined();
    const [first] = await audits(f);
    expect(first!.message).toBe(`StoreCommand.Delete ${cmd!.commandUuid}`);
    await f.runtime.stores.delete("log", ADMIN, String(first!.id));
    const after = await audits(f);
    expect(after.map((e) => e.message)).toEqual([`StoreLog.Delete ${first!.id}`]);
  });

  it("NOT_FOUND for a missing entry (no audit); INVALID_ACTION where a store does not allow the change (no audit)", async () => {
    rig = await startRig();
    registerStorePermissions(rig.facade);
    const s = rig.facade.runtime.stores;
    await rig.place("o1");
    expect((await rejection(s.delete("data", ADMIN, "missing"))).code).toBe("NOT_FOUND");
    expect((await rejection(s.delete("cache", ADMIN, "missing"))).code).toBe("NOT_FOUND");
    expect((await rejection(s.delete("log", ADMIN, "999"))).code).toBe("NOT_FOUND");
    expect((await rejection(s.update("event", ADMIN, "1", {}))).code).toBe("INVALID_ACTION");
    expect((await rejection(s.delete("event", ADMIN, "1"))).code).toBe("INVALID_ACTION");
    expect((await rejection(s.update("command", ADMIN, "x", {}))).code).toBe("INVALID_ACTION");
    expect((await rejection(s.update("log", ADMIN, "1", {}))).code).toBe("INVALID_ACTION");
    expect(await audits(rig.facade)).toEqual([]);
    expect(await rig.facade.eventRepository.headPosition()).toBe(1);
  });
});
