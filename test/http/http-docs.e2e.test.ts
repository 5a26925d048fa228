/**
 * Runs the curl walk-through of docs/http.md against the demo app on a real
 * server: every ```sh block in order, in one bash session, and compares the
 * HTTP status of each block that states one (`# -> 201`).
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDemoApp, type DemoApp } from "../../examples/http-common/demo-app.js";
import { HTTP_PATHS, nodeListenerFor } from "../support/http-fixture.js";

const run = promisify(execFile);
const PASSWORD = "docs walk-through password";
const dir = mkdtempSync(join(tmpdir(), "mneme-http-docs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Block {
  code: string;
  expected: number | undefined;
}

/** The ```sh blocks of a walk-through section. */
function walkThrough(doc: string, heading: string): Block[] {
  const md = readFileSync(new URL(`../../docs/${doc}`, import.meta.url), "utf8");
  const start = md.indexOf(heading);
  if (start < 0) throw new Error(`docs/${doc} has no section ${heading}`);
  const end = md.indexOf("\n## ", start + 1);
  const section = md.slice(start, end < 0 ? undefined : end);
  const blocks: Block[] = [];
  for (const m of section.matchAll(/```sh\n([\s\S]*?)```/g)) {
    const code = m[1]!;
    const status = /^# -> (\d{3})/m.exec(code);
    blocks.push({ code, expected: status === null ? undefined : Number(status[1]) });
  }
  return blocks;
}

// Each path gets a demo app of its own: the walk-throughs change what they run against.
describe.each(HTTP_PATHS)("over node:http, %s path", (httpPath) => {
  let app: DemoApp;
  let server: Server;
  let url: string;

  beforeAll(async () => {
    process.env.MNEME_ADMIN_PASSWORD = PASSWORD;
    delete process.env.MNEME_DB;
    app = await createDemoApp();
    const nodeListener = nodeListenerFor(app.handler, httpPath);
    server = createServer((req, res) => void nodeListener(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await app.facade.stop();
  });

  describe.each([
    ["http.md", "## Walk-through with curl", 20],
    ["tenancy.md", "## Walk-through", 15],
  ])("docs/%s", (doc, heading, minBlocks) => {
    it("every curl example of the walk-through answers the status it documents", async () => {
      const blocks = walkThrough(doc, heading);
      expect(blocks.length).toBeGreaterThan(minBlocks);
      const statusFile = join(dir, `${httpPath}-${doc}.status`);
      const bodyFile = join(dir, `${httpPath}-${doc}.body`);
      writeFileSync(statusFile, "");
      const script: string[] = ["set -euo pipefail"];
      blocks.forEach((b, i) => {
        if (b.expected === undefined) {
          script.push(b.code);
          return;
        }
        // The block's own curl, with its status appended to a file; its body kept for the failure message.
        script.push(
          `curl() { command curl -sS -o "${bodyFile}.${i}" -w '%{http_code}\\n' "$@" >> "${statusFile}" || true; }`,
          b.code,
          "unset -f curl",
        );
      });
      const scriptFile = join(dir, `${httpPath}-${doc}.walk.sh`);
      writeFileSync(scriptFile, script.join("\n"));
      await run("bash", [scriptFile], { env: { ...process.env, MNEME: url, MNEME_ADMIN_PASSWORD: PASSWORD }, timeout: 60_000 });
      const got = readFileSync(statusFile, "utf8").trim().split("\n").map(Number);
      const checked = blocks.map((b, i) => ({ ...b, i })).filter((b) => b.expected !== undefined);
      expect(got.length).toBe(checked.length);
      checked.forEach((b, k) => {
        let body = "";
        try {
          body = readFileSync(`${bodyFile}.${b.i}`, "utf8").slice(0, 400);
        } catch {
          // no body (204)
        }
        expect(got[k], `${b.code}\n${body}`).toBe(b.expected);
      });
    }, 90_000);
  });
});
