/**
 * examples/observability runs as docs/observability.md shows it: its console
 * output names every mneme span and metric, the continued trace of the caller,
 * and each mneme.handle span links to the mneme.dispatch span of its command.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runProcess } from "../support/run-process.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** The top-level objects ConsoleSpanExporter printed: one per span, as text. */
function spanBlocks(out: string): string[] {
  return out.split(/\n(?=\{\n)/).filter((b) => b.includes("instrumentationScope"));
}

function field(block: string, name: string): string | undefined {
  return new RegExp(`^  ${name}: '([^']*)'`, "m").exec(block)?.[1];
}

describe("examples/observability", () => {
  it("prints the spans of a command through a readmodel, a query, a restoration, and the metrics", async () => {
    const run = await runProcess(process.execPath, ["--import", "tsx", "examples/observability/main.ts"], root, 60_000);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const blocks = spanBlocks(run.stdout);
    const byName = (name: string) => blocks.filter((b) => field(b, "name") === name);
    expect(byName("mneme.restore")).toHaveLength(1);
    expect(byName("mneme.dispatch")).toHaveLength(2);
    expect(byName("mneme.append")).toHaveLength(2);
    expect(byName("mneme.handle")).toHaveLength(2);
    expect(byName("mneme.query")).toHaveLength(1);
    expect(run.stdout).toContain("notes counted by the readmodel: 2");

    // The first dispatch is a child of the application's span; the second continues the caller's trace.
    const [app] = byName("example.request");
    const [inApp, continued] = byName("mneme.dispatch");
    expect(field(inApp!, "traceId")).toBe(field(app!, "traceId"));
    expect(inApp).toContain(`spanId: '${field(app!, "id")!}'`);
    expect(field(continued!, "traceId")).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    expect(continued).toContain("spanId: '00f067aa0ba902b7'");
    // Each batch links to its command's dispatch span.
    const links = byName("mneme.handle").map((b) => /links: \[[\s\S]*?spanId: '([\da-f]{16})'/.exec(b)?.[1]);
    expect(links).toEqual([field(inApp!, "id"), field(continued!, "id")]);

    for (const metric of ["mneme.commands", "mneme.command.duration", "mneme.handler.events", "mneme.handler.lag"]) {
      expect(run.stdout).toContain(`name: '${metric}'`);
    }
  });
});
