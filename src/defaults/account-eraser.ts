/**
 * The AccountEraser keeps the Account domain in step with the erasure of an
 * account's personal data:
 * - it completes `RemoveAccount { erase: true }` once its events are stored,
 *   by deleting the account's key (`facade.forget`), so the account's email
 *   and name read "[erased]" everywhere; a replay (a new instance, a new
 *   checkpoint store) finds the key gone and forgets nothing twice;
 * - when an account's key is deleted another way (`facade.forget(accountUuid)`
 *   by the application) while the account lives on, it appends
 *   `AccountErased` to the account, so the Account projection, which keeps the
 *   values it folded while the key was there, drops them too.
 * An event handler rather than a step of a command, so the key is deleted only
 * for a removal that was stored, and a failure is retried like any handler's.
 */
import type { Facade } from "../app/facade.js";
import { isMnemeError } from "../model/errors.js";
import { SubjectForgotten } from "../privacy/privacy-domain.js";
import { BaseEventHandler } from "../readmodel/base-event-handler.js";
import { AccountEmailChanged, AccountErased, AccountNameChanged, AccountRegistered, AccountRemoved } from "./account-domain.js";
import { READMODELS } from "./readmodel-names.js";

/** Deletes the key of every account removed with `erase: true`, and records the erasure on accounts forgotten otherwise. */
export class AccountEraser extends BaseEventHandler {
  constructor(facade: Facade) {
    super();
    this.domain = "Account";
    this.name = READMODELS.accountEraser;
    this.addDomainEventHandler(AccountRemoved, async (_ctx, e, p) => {
      if (p.erased === true && (await facade.keyStore.keyOf(e.aggregateUuid)) !== undefined) await facade.forget(e.aggregateUuid);
    });
    this.addDomainEventHandler(SubjectForgotten, async (_ctx, _e, p) => {
      // A command on the account may move it meanwhile: load again and retry (a few times; then the runner's retry).
      for (let attempt = 1; ; attempt++) {
        // The folded state reads "[erased]" already (the key is gone): the events tell whether the erasure is recorded.
        const events = await facade.eventRepository.loadAggregate(p.subject);
        const lastPersonal = events.findLastIndex((e) => AccountRegistered.is(e) || AccountEmailChanged.is(e) || AccountNameChanged.is(e));
        const lastErasure = events.findLastIndex((e) => AccountErased.is(e) || (AccountRemoved.is(e) && e.payload.erased === true));
        // Not an account, or every personal value it holds was erased on the account already.
        if (lastPersonal < 0 || lastErasure > lastPersonal) return;
        const version = events[events.length - 1]!.version;
        try {
          await facade.eventRepository.append([AccountErased.create(p.subject, {}, { tenantUuid: "" })], {
            expectedVersions: { [p.subject]: version },
            globalAggregates: [p.subject],
          });
          return;
        } catch (err) {
          if (!isMnemeError(err, "CONFLICT") || attempt >= 5) throw err;
        }
      }
    });
  }
}
