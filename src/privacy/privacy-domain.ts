/**
 * The `Privacy` domain: the event `facade.forget(subject)` appends once the
 * subject's key is deleted, so readmodels that keep their own copies of
 * personal data (beyond what a rebuild from zero recomputes) learn of it on
 * every instance, in order with the other events. Installed by the facade
 * like the Runtime domain.
 */
import { v5 as uuidv5 } from "uuid";
import { Privacy, SubjectForgotten } from "../model/privacy-events.js";

export { Privacy, SubjectForgotten };

const FORGET_NAMESPACE = "3f6a3d2e-8c1b-4e0f-9b57-2d7c4a1e6f90";

/** The aggregate a subject's SubjectForgotten events belong to (derived, so it never meets another aggregate's versions). */
export function forgetAggregateUuidOf(subject: string): string {
  return uuidv5(JSON.stringify(["subject-forgotten", subject]), FORGET_NAMESPACE);
}

/**
 * Payload of `Privacy.PersonalDataMigrated`: the progress mark of the
 * personal-data migration (`facade.migratePersonalData`), appended after each
 * page it sealed and once when it completed. A rerun continues after the last
 * mark made under the same declarations; the start-up check reads from it.
 */
export interface PersonalDataMigrated {
  /** The declared event types and fields the migration covered (`Domain.Name:/field,...`, sorted). */
  declarations: string[];
  /** Events of those types are sealed up to this position. */
  throughPosition: number;
  /** Events rewritten since the previous mark. */
  sealedEvents: number;
  /** Command records rewritten (the completing mark). */
  sealedRecords?: number;
  /** True on the mark of a run that reached the head. */
  complete: boolean;
}

/** The `Privacy.PersonalDataMigrated` event token (see {@link PersonalDataMigrated}). */
export const PersonalDataMigrated = Privacy.event<PersonalDataMigrated>("PersonalDataMigrated", {
  description: "The personal-data migration sealed the declared fields stored in clear, up to a position",
});

/** The aggregate of the migration's progress marks. */
export const migrationAggregateUuid = uuidv5(JSON.stringify(["personal-data-migration"]), FORGET_NAMESPACE);
