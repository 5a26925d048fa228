/**
 * The `Privacy` domain: the event `facade.forget(subject)` appends once the
 * subject's key is deleted, so readmodels that keep their own copies of
 * personal data (beyond what a rebuild from zero recomputes) learn of it on
 * every instance, in order with the other events. Installed by the facade
 * like the Runtime domain.
 */
import { v5 as uuidv5 } from "uuid";
import { defineDomain } from "../model/domain.js";

/** Personal data protection: the forgetting of data subjects. */
export const Privacy = defineDomain("Privacy", { description: "Personal data protection: subjects whose keys were deleted" });

/** Payload of the `Privacy.SubjectForgotten` event. */
export interface SubjectForgotten {
  /** The data subject whose key was deleted (an id such as an account uuid, never personal data itself). */
  subject: string;
  /** How many keys were deleted (0 when the subject had none). */
  keysDeleted: number;
}

/**
 * The `Privacy.SubjectForgotten` event token: a readmodel that keeps copies of a
 * subject's personal fields handles it and drops them.
 * @example
 * this.addDomainEventHandler(SubjectForgotten, async (_ctx, _e, p) => { await this.#contacts.delete(p.subject); });
 */
export const SubjectForgotten = Privacy.event<SubjectForgotten>("SubjectForgotten", {
  description: "A data subject's key was deleted: its personal fields read as [erased] from now on",
});

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
