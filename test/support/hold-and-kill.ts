/**
 * Runs a child process (`node --import tsx <script> ...args`) until it prints
 * "running" (its handler holds what the test wants held: a claim), runs
 * `whileAlive`, then kills it with SIGKILL and waits for it to be gone.
 */
import { type ChildProcess, fork } from "node:child_process";
import { expect } from "vitest";

export async function holdAndKill(script: string, args: string[], whileAlive: () => Promise<void> = async () => undefined): Promise<void> {
  const child: ChildProcess = fork(script, args, { execArgv: ["--import", "tsx"], stdio: ["ignore", "pipe", "inherit", "ipc"] });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_code, signal) => resolve(signal)));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the child did not reach its handler in 60 s")), 60_000);
      child.stdout!.on("data", (b: Buffer) => {
        if (b.toString().includes("running")) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once("exit", (code) => reject(new Error(`the child exited early (${String(code)})`)));
    });
    await whileAlive();
  } finally {
    child.kill("SIGKILL");
  }
  expect(await exited).toBe("SIGKILL");
}
