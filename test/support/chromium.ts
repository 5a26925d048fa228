/**
 * Where the browser tests find Chromium: CHROMIUM_PATH, else a `chromium`,
 * `chromium-browser`, `google-chrome` or `google-chrome-stable` on the PATH
 * (Debian's package installs /usr/bin/chromium; .ci/run installs it).
 */
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { type Browser, chromium } from "playwright-core";

const NAMES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];

export function findChromium(): string | undefined {
  const explicit = process.env.CHROMIUM_PATH;
  if (explicit !== undefined && explicit !== "") return executable(explicit) ? explicit : undefined;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    for (const name of NAMES) {
      const file = join(dir, name);
      if (dir !== "" && executable(file)) return file;
    }
  }
  return undefined;
}

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Headless Chromium driven by playwright-core, from the executable found above. */
export function launchChromium(executablePath: string): Promise<Browser> {
  // --no-sandbox: CI containers run as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath, headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
}
