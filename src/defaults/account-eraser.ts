/**
 * The AccountEraser: completes `RemoveAccount { erase: true }` once its events
 * are committed, by deleting the account's key (`facade.forget`), so the
 * account's email and name read as "[erased]" everywhere. An event handler
 * rather than a step of the command, so the key is deleted only for a removal
 * that was stored, and a failed deletion is retried like any handler failure.
 */
import type { Facade } from "../app/facade.js";
import { BaseEventHandler } from "../readmodel/base-event-handler.js";
import { AccountRemoved } from "./account-domain.js";
import { READMODELS } from "./readmodel-names.js";

/** Deletes the key of every account removed with `erase: true`. */
export class AccountEraser extends BaseEventHandler {
  constructor(facade: Facade) {
    super();
    this.domain = "Account";
    this.name = READMODELS.accountEraser;
    this.addDomainEventHandler(AccountRemoved, async (_ctx, e, p) => {
      // A replay (restore from zero, a new instance) finds the key gone already: nothing to forget, no second SubjectForgotten.
      if (p.erased === true && (await facade.keyStore.keyOf(e.aggregateUuid)) !== undefined) await facade.forget(e.aggregateUuid);
    });
  }
}
