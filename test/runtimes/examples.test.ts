/**
 * examples/runtimes: the runtime's own server example (bun-server.ts on Bun,
 * deno-server.ts on Deno) started as its own process of this runtime on a
 * SQLite file, signed in to, given a command, and stopped with SIGTERM.
 * Node.js serves the same app through examples/http-node (test/http/http-examples.e2e.test.ts).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { newUuid } from "mneme";
import { currentRuntime } from "./runtime.js";

const dir = mkdtempSync(join(tmpdir(), "mneme-rt-examples-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** How this runtime starts its example against dist/ (Bun would read src/ through the repository's tsconfig paths). */
const COMMANDS = {
  bun: ["--tsconfig-override=test/runtimes/bun-dist.tsconfig.json", "examples/runtimes/bun-server.ts"],
  // --sloppy-imports: the repository's TypeScript imports its .ts files by their .js names.
  deno: [
    "run",
    "--sloppy-imports",
    "--allow-net",
    "--allow-env",
    "--allow-read",
    "--allow-write",
    "--allow-sys",
    "examples/runtimes/deno-server.ts",
  ],
} as const;
const runtime = currentRuntime();

it.skipIf(runtime === "node")(`examples/runtimes/${runtime}-server.ts serves the demo and stops on SIGTERM`, async () => {
  const args = COMMANDS[runtime as "bun" | "deno"];
  // The example on a SQLite file of its own: without DATABASE_URL (CI exports it), which would put it on a shared Postgres schema.
  const { DATABASE_URL: _shared, ...env } = process.env;
  const proc = spawn(process.execPath, [...args], {
    env: { ...env, PORT: "0", MNEME_DB: join(dir, "demo.db"), MNEME_ADMIN_PASSWORD: "example-password-1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  proc.stderr.on("data", (b: Buffer) => (output += b.toString()));
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    proc.once("exit", (code, signal) => resolve({ code, signal })),
  );
  try {
    const url = await new Promise<string>((resolve, reject) => {
      proc.stdout.on("data", (b: Buffer) => {
        output += b.toString();
        const m = /listening on (http:\/\/\S+)/.exec(output);
        if (m) resolve(m[1]!);
      });
      void exited.then((end) => reject(new Error(`the example exited (${JSON.stringify(end)}) before listening:\n${output}`)));
    });
    const json = { "content-type": "application/json" };
    const login = await fetch(`${url}/api/sessions`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ email: "admin@example.org", password: "example-password-1" }),
    });
    expect(login.status).toBe(201);
    const session = (await login.json()) as { token: string; identities: { identityUuid: string; tenantUuid: string }[] };
    const { identityUuid, tenantUuid } = session.identities[0]!;
    const auth = { authorization: `Bearer ${session.token}`, "x-identity-uuid": identityUuid };
    const created = await fetch(`${url}/api/tenants/${tenantUuid}/commands/Todo/CreateTodo?wait=true`, {
      method: "POST",
      headers: { ...auth, ...json },
      body: JSON.stringify({ todoUuid: newUuid(), title: `from the ${runtime} example` }),
    });
    expect(created.status, await created.clone().text()).toBe(200);
    const list = await fetch(`${url}/api/tenants/${tenantUuid}/queries/Todo/ListTodos`, {
      method: "POST",
      headers: { ...auth, ...json },
      body: "{}",
    });
    expect(((await list.json()) as { items: { model: { title: string } }[] }).items.map((i) => i.model.title)).toEqual([
      `from the ${runtime} example`,
    ]);
  } finally {
    proc.kill("SIGTERM");
  }
  const end = await exited;
  // It ran its shutdown to the end (server, then facade) and exited by itself.
  expect(output).toMatch(/\nstopped\n/);
  // Deno's node:child_process reports a child that handled SIGTERM and exited 0 as killed by SIGTERM
  // (Node.js and Bun report code 0; docs/runtimes.md); there "stopped" above is what tells the clean exit.
  expect(end, output).toEqual(runtime === "deno" ? { code: null, signal: "SIGTERM" } : { code: 0, signal: null });
});
