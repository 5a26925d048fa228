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

/** True when CI is set to anything but "", "0" or "false": a missing browser then fails instead of skipping. */
export function onCi(): boolean {
  const ci = process.env.CI;
  return ci !== undefined && ci !== "" && ci !== "0" && ci.toLowerCase() !== "false";
}

/**
 * The browser tests' gate: the Chromium found, and whether to skip them.
 * A skip is loud: it is written to stderr in a box when the test file loads,
 * so `npm test` does not report a dozen fewer tests in silence. On CI there
 * is no skip: the tests run and fail on the missing browser.
 */
export function browserGate(file: string): { readonly chromiumPath: string | undefined; readonly skip: boolean; readonly reason: string } {
  const chromiumPath = findChromium();
  const reason = "no Chromium found: set CHROMIUM_PATH or `apt-get install chromium` (with CI=true this fails instead of skipping)";
  const skip = chromiumPath === undefined && !onCi();
  if (skip) {
    const line = `SKIPPED: the browser tests of ${file}: ${reason}`;
    const bar = "!".repeat(Math.min(line.length + 4, 120));
    process.stderr.write(`\n${bar}\n! ${line}\n${bar}\n\n`);
  }
  return { chromiumPath, skip, reason };
}

/** Headless Chromium driven by playwright-core, from the executable found above. */
export function launchChromium(executablePath: string): Promise<Browser> {
  // --no-sandbox: CI containers run as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath, headless: true, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
}
