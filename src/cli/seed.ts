/**
 * `mneme seed --app <module> --file <json>`: tenants, groups, accounts and
 * identities from a JSON file, idempotently (src/defaults/seed.ts). The file
 * is checked before the app starts, so a bad one changes nothing.
 */
import { readFileSync } from "node:fs";
import { errorMessage, MnemeError } from "../model/errors.js";
import { parseSeedDocument, seedDefaults, type SeedReport } from "../defaults/seed.js";
import { withStartedApp } from "./load-app.js";

/** What `mneme seed` was asked. */
export interface SeedCommand {
  /** The app module (a path; relative to the working directory). */
  readonly app: string;
  /** The seed file (JSON). */
  readonly file: string;
}

/** Reads and checks the file, then seeds the app as one more instance; resolves the report to print. */
export function runSeedCommand(cmd: SeedCommand): Promise<SeedReport> {
  let text: string;
  try {
    text = readFileSync(cmd.file, "utf8");
  } catch (e) {
    throw new MnemeError("INVALID_REQUEST", `cannot read the seed file ${cmd.file}: ${errorMessage(e)}`, { cause: e });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new MnemeError("VALIDATION_FAILED", `the seed file ${cmd.file} is not JSON: ${errorMessage(e)}`, {
      cause: e,
      details: [{ pointer: "", message: "is not JSON" }],
    });
  }
  const doc = parseSeedDocument(parsed);
  return withStartedApp(cmd.app, (facade) => seedDefaults(facade, doc));
}
