/**
 * The AuthIndex readmodel: lookups the projections cannot answer, kept as
 * small documents with top-level fields so a collection filter finds them:
 * the live identities of an account, and the open sessions of an account.
 */
import type { Facade } from "../app/facade.js";
import { BaseReadmodel } from "../readmodel/base-readmodel.js";
import type { ReadmodelCollection } from "../store/readmodel-store-backend.js";
import { SessionEnded, SessionStarted } from "./account-domain.js";
import { IdentityCreated, IdentityRemoved } from "./identity-domain.js";
import { READMODELS } from "./readmodel-names.js";

/** One live identity of an account. */
export interface IdentityRef {
  identityUuid: string;
  accountUuid: string;
  tenantUuid: string;
}
/** One open session of an account. */
export interface SessionRef {
  sessionUuid: string;
  accountUuid: string;
}

const PAGE = 1000;

/** Identities and sessions by account. */
export class AuthIndex extends BaseReadmodel {
  readonly #identities: ReadmodelCollection<IdentityRef>;
  readonly #sessions: ReadmodelCollection<SessionRef>;

  constructor(facade: Facade) {
    super(facade);
    this.domain = "Identity";
    this.name = READMODELS.authIndex;
    // An account's identities and sessions span tenants: the index is shared (account removal reads it whole).
    this.#identities = this.collection<IdentityRef>("identities", { tenancy: "global" });
    this.#sessions = this.collection<SessionRef>("sessions", { tenancy: "global" });
    this.addDomainEventHandler(IdentityCreated, (_ctx, e, p) =>
      this.#identities.put(e.aggregateUuid, { identityUuid: e.aggregateUuid, accountUuid: p.accountUuid, tenantUuid: p.tenantUuid }),
    );
    this.addDomainEventHandler(IdentityRemoved, async (_ctx, e) => {
      await this.#identities.delete(e.aggregateUuid);
    });
    this.addDomainEventHandler(SessionStarted, (_ctx, e, p) =>
      this.#sessions.put(e.aggregateUuid, { sessionUuid: e.aggregateUuid, accountUuid: p.accountUuid }),
    );
    this.addDomainEventHandler(SessionEnded, async (_ctx, e) => {
      await this.#sessions.delete(e.aggregateUuid);
    });
  }

  /** The live identities of an account (every page). */
  identitiesOf(accountUuid: string): Promise<IdentityRef[]> {
    return listAll(this.#identities, { accountUuid });
  }

  /** The open sessions of an account (every page; expired ones included until they end). */
  sessionsOf(accountUuid: string): Promise<SessionRef[]> {
    return listAll(this.#sessions, { accountUuid });
  }
}

async function listAll<T>(c: ReadmodelCollection<T>, where: Record<string, string>): Promise<T[]> {
  const out: T[] = [];
  for (let offset = 0; ; offset += PAGE) {
    const page = await c.list({ where, offset, limit: PAGE });
    out.push(...page);
    if (page.length < PAGE) return out;
  }
}
