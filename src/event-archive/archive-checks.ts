import { MnemeError } from "../model/errors.js";
import type { ArchiveBlocker } from "./archive-index.js";

/** CONFLICT when the stored rows of positions[from, to) are not the ones hashed in the files. */
export function checkStored(
  stored: readonly [number | string, string | null][],
  positions: readonly number[],
  hashes: readonly string[],
  from: number,
  to: number,
): void {
  if (stored.length !== to - from) {
    throw new MnemeError(
      "CONFLICT",
      `store archive: ${to - from - stored.length} of the events written to the files are no longer in the database; nothing was removed`,
    );
  }
  for (let k = 0; k < stored.length; k++) {
    if (Number(stored[k]![0]) !== positions[from + k] || stored[k]![1] !== hashes[from + k]) {
      throw new MnemeError(
        "CONFLICT",
        `store archive: the event at position ${positions[from + k]} changed after it was written to the files; nothing was removed`,
      );
    }
  }
}

/** CONFLICT naming what refuses the archive (see ArchiveBlocker). */
export function refuseBlocked(blockers: readonly ArchiveBlocker[]): void {
  if (blockers.length === 0) return;
  const first = blockers[0]!;
  const what =
    first.kind === "checkpoint"
      ? `handler ${first.name} is at position ${first.position}, below the boundary: it still reads these events from the database (let it catch up, or remove it)`
      : `the snapshot of ${first.name} at version ${first.position} is older than events the archive would move: loads from it read them from the database (take a newer snapshot, or archive less)`;
  throw new MnemeError(
    "CONFLICT",
    `store archive refused: ${what}${blockers.length > 1 ? ` (and ${blockers.length - 1} more, in details)` : ""}`,
    {
      details: blockers.map((b) => ({
        message: b.kind === "checkpoint" ? "handler behind the boundary" : "snapshot needs the events",
        kind: b.kind,
        name: b.name,
        position: b.position,
      })),
    },
  );
}
