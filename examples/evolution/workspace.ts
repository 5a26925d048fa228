/**
 * What every example of docs/evolution.md shares: a request context and a
 * SQLite file in a fresh temporary directory, so that two releases of an
 * application can open the same database one after the other (or side by side).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RequestContext } from "mneme";

export const reqCtx: RequestContext = {
  senderAccountUuid: "account-1",
  senderSessionUuid: "session-1",
  senderIdentityUuid: "identity-1",
  senderTenantUuid: "tenant-1",
};

/** A temporary directory with one database file in it; `remove()` deletes both. */
export interface Workspace {
  readonly filename: string;
  remove(): void;
}

export function workspace(name: string): Workspace {
  const dir = mkdtempSync(join(tmpdir(), `mneme-evolution-${name}-`));
  return { filename: join(dir, `${name}.db`), remove: () => rmSync(dir, { recursive: true, force: true }) };
}
