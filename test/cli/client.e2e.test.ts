/**
 * The typed client `mneme client` writes: generated for the library app in a
 * child process, compiled with `tsc --strict --noEmit` (and the stricter
 * flags an application may set), then used against the app served over
 * node:http on SQLite and on Postgres: a command and a query, a validation
 * problem, a permission denied (authorized level and custom function), the
 * app's own error code, an anonymous query, and idempotent retries (the same
 * key twice, and a response lost after the server ran the command).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newUuid } from "mneme";
import { BOB, login, type LibraryWorld, type Session, startLibrary, ANN } from "../support/library-world.js";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { runProcess } from "../support/run-process.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const files = sqliteScratch("client");
const pg = postgresScratch("client");
const dir = mkdtempSync(join(tmpdir(), "mneme-client-"));
const clientFile = join(dir, "library-client.ts");

/** What the test uses of the generated module (its own types are checked by tsc below). */
interface Result {
  ok: boolean;
  status: number;
  value?: any;
  problem?: { code: string; status: number; detail: string; errors?: { pointer: string }[] };
}
interface Generated {
  createClient(options: Record<string, unknown>): {
    commands: Record<string, Record<string, (payload?: unknown, call?: Record<string, unknown>) => Promise<Result>>>;
    queries: Record<string, Record<string, (payload?: unknown, call?: Record<string, unknown>) => Promise<Result>>>;
  };
}
let generated: Generated;

beforeAll(async () => {
  const run = await runProcess(
    "npx",
    ["tsx", "src/cli/main.ts", "client", "--app", "test/support/library-app.ts", "--out", clientFile],
    root,
    90_000,
    {
      ...process.env,
      LIBRARY_DB: files.newFile(),
    },
  );
  expect(run.stderr).toBe("");
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(/wrote a typed client of library \(\d+ commands and queries\)/);
  generated = (await import(pathToFileURL(clientFile).href)) as Generated;
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the generated client", () => {
  it("is one dependency-free file that compiles with tsc --strict", async () => {
    const source = readFileSync(clientFile, "utf8");
    expect(source).not.toMatch(/^import /m);
    expect(source).toMatch(
      /export type Library_AddBook = \{\n {2}bookUuid: string;\n {2}title: string;\n {2}shelf\?: Library_Shelf;\n {2}tags\?: string\[\];\n\};/,
    );
    expect(source).toContain(
      "AddBook: <R = unknown>(payload: Library_AddBook, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>>",
    );
    // ListBooks requires nothing: its payload may be left out.
    expect(source).toContain("ListBooks: <R = unknown>(payload?: Library_ListBooks, call?: CallOptions): Promise<Result<R>>");
    // GetBook declares its result's schema: the result type by default.
    expect(source).toContain("GetBook: <R = Library_GetBook_Result>(payload: Library_GetBook, call?: CallOptions): Promise<Result<R>>");
    expect(source).toContain("export type Library_GetBook_Result = null | {\n  aggregateUuid: string;\n  model: Library_BookState;\n};");
    const tsc = join(root, "node_modules/typescript/bin/tsc");
    const flags = [
      "--noEmit",
      "--strict",
      "--target",
      "es2022",
      "--module",
      "esnext",
      "--moduleResolution",
      "bundler",
      "--lib",
      "es2022,dom",
    ];
    const strictest = [
      "--exactOptionalPropertyTypes",
      "--noUncheckedIndexedAccess",
      "--noPropertyAccessFromIndexSignature",
      "--erasableSyntaxOnly",
    ];
    // A use of the client that must type-check, and one that must not (a payload of the wrong shape).
    const use = join(dir, "use.ts");
    const misuse = join(dir, "misuse.ts");
    writeFileSync(
      use,
      `import { createClient } from "./library-client.js";\n` +
        `const c = createClient({ baseUrl: "http://x", tenantUuid: "t", token: "a.b" });\n` +
        `export async function f(): Promise<string> {\n` +
        `  const r = await c.commands.Library.AddBook({ bookUuid: "u", title: "t", shelf: { room: "A", row: 2 } }, { wait: true });\n` +
        `  if (!r.ok) return r.problem.code;\n` +
        `  const q = await c.queries.Library.GetBook<{ model: { title: string } }>({ bookUuid: "u" });\n` +
        `  const typed = await c.queries.Library.GetBook({ bookUuid: "u" });\n` +
        `  if (typed.ok && typed.value !== null) return typed.value.model.title.toUpperCase() + String(typed.value.model.lentTo);\n` +
        `  return q.ok ? q.value.model.title + r.value.commandUuid : q.problem.detail;\n}\n`,
    );
    writeFileSync(
      misuse,
      `import { createClient } from "./library-client.js";\n` +
        `const c = createClient({ baseUrl: "http://x" });\n` +
        `void c.commands.Library.AddBook({ bookUuid: "u", shelf: { row: 2 } });\n` +
        `export async function g(): Promise<number> {\n` +
        `  const r = await c.queries.Library.GetBook({ bookUuid: "u" });\n` +
        `  return r.ok && r.value !== null ? r.value.model.title : 0;\n}\n`,
    );
    const ok = await runProcess(process.execPath, [tsc, ...flags, ...strictest, clientFile, use], dir);
    expect(ok.stdout + ok.stderr).toBe("");
    expect(ok.code).toBe(0);
    // Without the DOM lib: the types of Node's fetch (@types/node) are enough.
    const nodeTypes = ["--noEmit", "--strict", "--target", "es2022", "--module", "nodenext", "--lib", "es2022", "--types", "node"];
    const onNode = await runProcess(
      process.execPath,
      [tsc, ...nodeTypes, "--typeRoots", join(root, "node_modules/@types"), clientFile, use],
      dir,
    );
    expect(onNode.stdout + onNode.stderr).toBe("");
    expect(onNode.code).toBe(0);
    const bad = await runProcess(process.execPath, [tsc, ...flags, misuse], dir);
    expect(bad.code).not.toBe(0);
    expect(bad.stdout).toMatch(/Property 'title' is missing|Property 'room' is missing/);
    // The result type comes from GetBook's resultSchema: a title is a string, not a number.
    expect(bad.stdout).toMatch(/misuse\.ts\(6,\d+\): error TS2322: Type 'string' is not assignable to type 'number'/);
  }, 120_000);
});

describe.each([
  ["SQLite", () => ({ db: files.newFile(), schema: undefined as string | undefined })],
  ["Postgres", () => ({ db: DATABASE_URL, schema: pg.newSchema() as string | undefined })],
])("the generated client against the app on %s", (_name, place) => {
  let world: LibraryWorld;
  let ann: Session;
  let bob: Session;

  beforeAll(async () => {
    const { db, schema } = place();
    world = await startLibrary(db, schema);
    ann = await login(world.url, ANN);
    bob = await login(world.url, BOB);
  }, 60_000);
  afterAll(async () => {
    await world?.close();
  });

  const clientOf = (s: Session | undefined, extra: Record<string, unknown> = {}) =>
    generated.createClient({
      baseUrl: world.url,
      tenantUuid: (s ?? ann).tenantUuid,
      ...(s === undefined ? {} : { token: s.token, identityUuid: s.identityUuid }),
      ...extra,
    });

  it("runs a command and a query, typed results as { ok, value }", async () => {
    const client = clientOf(ann);
    const bookUuid = newUuid();
    const added = await client.commands.Library!.AddBook!({ bookUuid, title: "Middlemarch", shelf: { room: "B", row: 3 } }, { wait: true });
    expect(added).toMatchObject({ ok: true, status: 200 });
    expect(added.value.commandUuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(added.value.events.map((e: { name: string }) => e.name)).toEqual(["BookAdded"]);
    const got = await client.queries.Library!.GetBook!({ bookUuid });
    expect(got).toMatchObject({ ok: true, status: 200, value: { aggregateUuid: bookUuid, model: { title: "Middlemarch", lentTo: null } } });
    // Anonymous: a client without credentials reads the list.
    const listed = await clientOf(undefined).queries.Library!.ListBooks!();
    expect(listed.ok).toBe(true);
  });

  it("answers problems as { ok: false, problem }: validation, permission denied, a custom permission, the app's own code", async () => {
    const client = clientOf(ann);
    const invalid = await client.commands.Library!.AddBook!({ bookUuid: newUuid(), title: "" });
    expect(invalid).toMatchObject({ ok: false, status: 400, problem: { code: "VALIDATION_FAILED", errors: [{ pointer: "/title" }] } });
    // Bob is a member of the tenant without the librarians' group: the authorizer denies AddBook.
    const denied = await clientOf(bob).commands.Library!.AddBook!({ bookUuid: newUuid(), title: "Emma" });
    expect(denied).toMatchObject({ ok: false, status: 403, problem: { code: "PERMISSION_DENIED" } });
    const anonymous = await clientOf(undefined).commands.Library!.AddBook!({ bookUuid: newUuid(), title: "Emma" });
    expect(anonymous).toMatchObject({ ok: false, status: 401, problem: { code: "UNAUTHENTICATED" } });
    const bookUuid = newUuid();
    expect((await client.commands.Library!.AddBook!({ bookUuid, title: "Persuasion" }, { wait: true })).ok).toBe(true);
    // LendBook's permission is a function: only the borrower lends to themselves.
    const forAnother = await client.commands.Library!.LendBook!({ bookUuid, borrowerAccountUuid: bob.accountUuid });
    expect(forAnother).toMatchObject({ ok: false, status: 403, problem: { code: "PERMISSION_DENIED" } });
    expect((await clientOf(bob).commands.Library!.LendBook!({ bookUuid, borrowerAccountUuid: bob.accountUuid })).ok).toBe(true);
    const again = await clientOf(ann).commands.Library!.LendBook!({ bookUuid, borrowerAccountUuid: ann.accountUuid });
    expect(again).toMatchObject({ ok: false, status: 422, problem: { code: "BOOK_UNAVAILABLE", status: 422 } });
  });

  it("replays a command sent again with the same idempotency key", async () => {
    const client = clientOf(ann);
    const bookUuid = newUuid();
    const key = `add-${bookUuid}`;
    const first = await client.commands.Library!.AddBook!({ bookUuid, title: "Ivanhoe" }, { idempotencyKey: key });
    const second = await client.commands.Library!.AddBook!({ bookUuid, title: "Ivanhoe" }, { idempotencyKey: key });
    expect(first).toMatchObject({ ok: true, status: 200 });
    expect(first.value.replayed).toBeUndefined();
    expect(second).toMatchObject({ ok: true, status: 200, value: { commandUuid: first.value.commandUuid, replayed: true } });
    // Without the key the same command runs again, and the aggregate refuses it.
    const third = await client.commands.Library!.AddBook!({ bookUuid, title: "Ivanhoe" }, { idempotencyKey: false });
    expect(third).toMatchObject({ ok: false, status: 409, problem: { code: "CONFLICT" } });
  });

  it("retries a command whose response was lost with the key it generated: it ran once", async () => {
    const bookUuid = newUuid();
    const sent: { key: string | null }[] = [];
    // The server runs the first request; its answer never reaches the client (a connection reset).
    const losing = async (input: string, init: RequestInit): Promise<Response> => {
      sent.push({ key: new Headers(init.headers).get("idempotency-key") });
      const response = await fetch(input, init);
      if (sent.length === 1) {
        await response.body?.cancel();
        throw new TypeError("fetch failed: the connection was reset");
      }
      return response;
    };
    const client = clientOf(ann, { fetch: losing });
    const added = await client.commands.Library!.AddBook!({ bookUuid, title: "Kenilworth" });
    expect(sent).toHaveLength(2);
    expect(sent[0]!.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent[1]!.key).toBe(sent[0]!.key);
    expect(added).toMatchObject({ ok: true, status: 200, value: { replayed: true } });
    const events = await world.facade.eventRepository.loadAggregate(bookUuid);
    expect(events.map((e) => e.name)).toEqual(["BookAdded"]);
    const got = await client.queries.Library!.GetBook!({ bookUuid });
    expect(got.ok).toBe(true);
  });
});
