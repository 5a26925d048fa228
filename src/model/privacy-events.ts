/**
 * The tokens of the `Privacy` domain that parts below the facade name: the
 * domain and `Privacy.SubjectForgotten`, the event `facade.forget(subject)`
 * appends once the subject's key is deleted (readmodels erase their copies on
 * it). The rest of the domain is defined in src/privacy/privacy-domain.ts.
 */
import { defineDomain } from "./domain.js";

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
