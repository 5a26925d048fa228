/**
 * Finding the claim of an email. Claim ids are derived from a keyed hash of
 * the normalised email (the key lives in the key store), so no event or id
 * holds the email in clear; claims of stores written before are still found
 * under their legacy (unkeyed) id.
 */
import type { AggregateLoader } from "../model/context.js";
import { EmailClaimAggregate } from "./account-domain.js";
import { emailClaimUuidOf, legacyEmailClaimUuidOf } from "./ids.js";
import type { DefaultsSettings } from "./settings.js";

/**
 * The claim of an email: the keyed one, or the legacy (unkeyed) one when that
 * holds an account (claims made before claims were keyed). The keyed claim is
 * loaded first, so it is the one the command locks. A free email is claimed
 * under the keyed id, or under the legacy one while instances of 0.1.0 run
 * beside this release (a rolling deploy in compatibility mode): they find an
 * email's account, and refuse it a second time, only there.
 */
export async function loadEmailClaim(
  ctx: { readonly aggregates: AggregateLoader },
  s: DefaultsSettings,
  normalizedEmail: string,
): Promise<{ claimUuid: string; accountUuid: string }> {
  const claimUuid = emailClaimUuidOf(normalizedEmail, await s.emailIndexKey());
  const claim = await ctx.aggregates.load(EmailClaimAggregate, claimUuid);
  if (claim.state.accountUuid !== "") return { claimUuid, accountUuid: claim.state.accountUuid };
  const legacyUuid = legacyEmailClaimUuidOf(normalizedEmail);
  const legacy = await ctx.aggregates.load(EmailClaimAggregate, legacyUuid);
  if (legacy.state.accountUuid !== "") return { claimUuid: legacyUuid, accountUuid: legacy.state.accountUuid };
  return { claimUuid: s.claimsForOldReaders() ? legacyUuid : claimUuid, accountUuid: "" };
}
