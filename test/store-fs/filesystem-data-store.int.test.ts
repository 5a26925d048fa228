import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FilesystemDataStore, fileNameOf } from "../../src/store-fs/filesystem-data-store.js";
import { describeDataStoreContract } from "../../src/testing/data-store-contract.js";

const roots = new Map<FilesystemDataStore, string>();

describeDataStoreContract(
  "filesystem",
  async () => {
    const root = await mkdtemp(join(tmpdir(), "mneme-fs-contract-"));
    // fsync changes durability, not behaviour; the tests below run with the default (on).
    const store = new FilesystemDataStore({ rootDir: root, fsync: false });
    roots.set(store, root);
    return store;
  },
  {
    cleanup: async (store) => {
      const root = roots.get(store as FilesystemDataStore);
      roots.delete(store as FilesystemDataStore);
      if (root !== undefined) await rm(root, { recursive: true, force: true });
    },
  },
);

describe("FilesystemDataStore on disk", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "mneme-fs-"));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("keeps entries across instances on the same directory", async () => {
    const a = new FilesystemDataStore({ rootDir: root });
    await a.init();
    const put = await a.put("docs/readme.md", "# hi", { contentType: "text/markdown" });
    await a.put("k".repeat(1024), new Uint8Array([7]));
    await a.close();
    const b = new FilesystemDataStore({ rootDir: root });
    await b.init();
    const got = await b.get("docs/readme.md");
    expect(got).toMatchObject({ ...put });
    expect(new TextDecoder().decode(got?.data)).toBe("# hi");
    expect(Array.from((await b.get("k".repeat(1024)))?.data ?? [])).toEqual([7]);
    expect((await b.list()).items.map((i) => i.key)).toEqual(["docs/readme.md", "k".repeat(1024)]);
    await b.close();
  });

  it("writes blobs and sidecars under root with encoded names and leaves no temp files", async () => {
    const s = new FilesystemDataStore({ rootDir: root, fsync: false });
    await s.init();
    await s.put("Img/Cat.png", new Uint8Array([1, 2]));
    await s.put("Img/Cat.png", new Uint8Array([3]));
    await s.put("x".repeat(300), "long");
    expect((await readdir(join(root, "meta"))).sort()).toEqual([`${fileNameOf("x".repeat(300))}.json`, "%49mg%2F%43at.png.json"].sort());
    expect(fileNameOf("x".repeat(300))).toMatch(/^~[0-9a-f]{64}$/);
    // One blob per entry: the overwritten blob was removed.
    expect(await readdir(join(root, "blobs"))).toHaveLength(2);
    expect(await readdir(join(root, "tmp"))).toEqual([]);
    await s.delete("Img/Cat.png");
    expect(await readdir(join(root, "blobs"))).toHaveLength(1);
    await s.close();
  });

  it("file names of distinct keys differ even ignoring case", () => {
    const keys = ["a", "A", "a/b", "a%2Fb", "%41", ".a", "a.", "ä", "a b", "-_.x"];
    const names = keys.map((k) => fileNameOf(k).toLowerCase());
    expect(new Set(names).size).toBe(keys.length);
    for (const n of names) expect(n.startsWith(".")).toBe(false);
  });

  it("init ignores fresh temp files and keeps referenced blobs", async () => {
    const s = new FilesystemDataStore({ rootDir: root });
    await s.init();
    await s.put("a", "1");
    await writeFile(join(root, "tmp", "in-flight.tmp"), "partial");
    const again = new FilesystemDataStore({ rootDir: root });
    await again.init();
    expect(await readdir(join(root, "tmp"))).toEqual(["in-flight.tmp"]);
    expect(new TextDecoder().decode((await again.get("a"))?.data)).toBe("1");
  });

  it("a corrupt sidecar gives STORE_ERROR", async () => {
    const s = new FilesystemDataStore({ rootDir: root });
    await s.init();
    await s.put("a", "1");
    await writeFile(join(root, "meta", "a.json"), "{not json");
    await expect(s.get("a")).rejects.toMatchObject({ code: "STORE_ERROR" });
  });
});
