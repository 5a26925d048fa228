/** Runs a program to its end for a test: its exit code and output, with npm's own config warnings left out of stderr. */
import { execFile, spawn } from "node:child_process";

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

export function runProcess(file: string, args: readonly string[], cwd: string, timeout = 120_000, env?: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      file,
      [...args],
      { cwd, timeout, maxBuffer: 16 * 1024 * 1024, ...(env === undefined ? {} : { env }) },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
        // npm may print its own config warnings; they are not the program's output.
        resolve({
          code,
          stdout,
          stderr: stderr
            .split("\n")
            .filter((l) => !l.startsWith("npm warn"))
            .join("\n"),
        });
      },
    );
  });
}

/** When a crash test kills its process: a time after "ready", or the first moment its output satisfies a test. */
export type KillAt = number | ((out: string) => boolean);

/**
 * Runs a TypeScript program (`node --import tsx`) for a crash test; kills it with SIGKILL `killAt` ms after it
 * printed "ready", or as soon as its output satisfies `killAt` (or lets it finish when undefined).
 */
export function runKillable(
  script: string,
  args: readonly string[],
  cwd: string,
  killAt?: KillAt,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", script, ...args], { cwd, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    let armed = false;
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (killAt === undefined || armed) return;
      if (typeof killAt === "function") {
        if (killAt(out)) {
          armed = true;
          child.kill("SIGKILL");
        }
      } else if (out.includes("ready")) {
        armed = true;
        setTimeout(() => child.kill("SIGKILL"), killAt);
      }
    });
    child.once("error", reject);
    child.once("exit", (code, signal) => resolve({ code, signal, out }));
  });
}
