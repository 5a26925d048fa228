/**
 * docs/first-app.md, followed as written: the example's own tsconfig
 * type-checks it; `mneme seed` fills a fresh Postgres schema (twice, the second
 * run changing nothing); two instances of the server share it over HTTP: an
 * agent of Acme opens tickets on one, the other serves them, the SLA timer
 * escalates the one left open and not the one closed in time, and Globex's
 * agent cannot see Acme's tickets; the dashboard is served; SIGTERM stops both.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { newUuid } from "mneme";
import { DATABASE_URL, postgresScratch } from "../support/postgres-scratch.js";
import { runProcess } from "../support/run-process.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const dir = join(root, "examples", "first-app");
const scratch = postgresScratch("first_app");
const tmp = mkdtempSync(join(tmpdir(), "mneme-first-app-"));
const running: ChildProcess[] = [];
afterAll(() => {
  for (const p of running) if (p.exitCode === null) p.kill("SIGKILL");
  rmSync(tmp, { recursive: true, force: true });
});

const SUBPATHS = ["sqlite", "postgres", "http", "defaults", "reactions", "store", "runtime", "types", "memory"];

function start(env: NodeJS.ProcessEnv): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(process.execPath, ["--import", "tsx", join(dir, "server.ts")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
  running.push(proc);
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start:\n${out}`)), 60_000);
    proc.stdout!.on("data", (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve({ url: m[1]!, proc });
      }
    });
    proc.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    proc.once("exit", (code) => reject(new Error(`the server exited with ${code}:\n${out}`)));
  });
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, json: text === "" ? undefined : JSON.parse(text) };
}

/** Signs in on one instance: what the next requests to it send. */
async function signIn(url: string, email: string, password: string) {
  const r = await post(`${url}/api/sessions`, { email, password });
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  const { identityUuid, tenantUuid } = r.json.identities[0] as { identityUuid: string; tenantUuid: string };
  const headers = { authorization: `Bearer ${r.json.token as string}`, "x-identity-uuid": identityUuid };
  // A fresh token is accepted by the very next request, on any instance (sessions are read from committed events).
  const next = await post(`${url}/api/tenants/${tenantUuid}/queries/Helpdesk/GetTicket`, { ticketUuid: newUuid() }, headers);
  expect(next.status, JSON.stringify(next.json)).not.toBe(401);
  return { tenantUuid, headers };
}

describe("docs/first-app.md", () => {
  it("type-checks with the tsconfig the guide gives", async () => {
    // The guide's compiler options, with mneme resolved to this repository's sources instead of node_modules.
    const paths: Record<string, string[]> = { mneme: [join(root, "src", "index.ts")] };
    for (const s of SUBPATHS) paths[`mneme/${s}`] = [join(root, "src", s, "index.ts")];
    const config = {
      extends: join(dir, "tsconfig.app.json"),
      compilerOptions: { paths, typeRoots: [join(root, "node_modules", "@types")] },
      include: [join(dir, "*.ts")],
    };
    writeFileSync(join(tmp, "tsconfig.json"), JSON.stringify(config));
    const r = await runProcess(
      process.execPath,
      [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", join(tmp, "tsconfig.json")],
      root,
      180_000,
    );
    expect(r.stdout + r.stderr).toBe("");
  }, 200_000);

  it("seeds Postgres, serves two instances, escalates by its SLA timer and stops on SIGTERM", async () => {
    const schema = scratch.newSchema();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL,
      HELPDESK_SCHEMA: schema,
      ADMIN_EMAIL: "admin@example.org",
      ADMIN_PASSWORD: "the admin's first password",
      SESSION_SECRET: "a secret of at least sixteen characters",
      HELPDESK_SLA_MS: "1500",
      PORT: "0",
      HOST: "127.0.0.1",
    };
    const seed = () =>
      runProcess(
        "npx",
        ["tsx", "src/cli/main.ts", "seed", "--app", join(dir, "app.ts"), "--file", join(dir, "seed.json")],
        root,
        120_000,
        env,
      );
    const first = await seed();
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ changed: true });
    const again = await seed();
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ changed: false, changes: [] });

    const [a, b] = await Promise.all([start(env), start(env)]);
    const annA = await signIn(a.url, "ann@acme.example", "ann's first password");
    const annB = await signIn(b.url, "ann@acme.example", "ann's first password");
    expect(annB.tenantUuid).toBe(annA.tenantUuid);
    const command = (url: string, who: typeof annA, name: string, payload: unknown) =>
      post(`${url}/api/tenants/${who.tenantUuid}/commands/Helpdesk/${name}?wait=true`, payload, who.headers);
    const ticket = (url: string, who: typeof annA, ticketUuid: string) =>
      post(`${url}/api/tenants/${who.tenantUuid}/queries/Helpdesk/GetTicket`, { ticketUuid }, who.headers);

    const late = newUuid();
    const closed = newUuid();
    expect((await command(a.url, annA, "OpenTicket", { ticketUuid: late, title: "printer on fire" })).status).toBe(200);
    expect((await command(a.url, annA, "OpenTicket", { ticketUuid: closed, title: "password reset" })).status).toBe(200);
    expect((await command(b.url, annB, "CloseTicket", { ticketUuid: closed })).status).toBe(200);
    // The other instance serves what the first wrote; the SLA timer escalates the ticket left open.
    await expect
      .poll(async () => (await ticket(b.url, annB, late)).json?.model?.status, { timeout: 30_000, interval: 200 })
      .toBe("escalated");
    expect((await ticket(a.url, annA, closed)).json.model.status).toBe("closed");
    // Globex's agent does not see Acme's tickets.
    const gus = await signIn(b.url, "gus@globex.example", "gus's first password");
    const foreign = await ticket(b.url, gus, late);
    expect(foreign.status).toBe(200);
    expect(foreign.json).toBeNull();
    // The dashboard is served by every instance; the administrator signs in there as on the API.
    const page = await fetch(`${b.url}/dashboard/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<html");
    await signIn(b.url, "admin@example.org", "the admin's first password");

    for (const p of [a.proc, b.proc]) {
      const exited = new Promise<number | null>((resolve) => p.once("exit", resolve));
      p.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
  }, 240_000);
});
