/**
 * Sessions of the `Account` domain: Login (anonymous; email and password ->
 * session uuid and a random key, of which only a keyed hash is stored) and
 * Logout (authenticated). Sessions expire `sessionTtlMs` after login. The
 * handlers are attached by `installSessions`, part of the Account domain's
 * install step, with the facade's settings.
 */
import { newUuid } from "../model/clock.js";
import { MnemeError } from "../model/errors.js";
import type { Facade } from "../app/facade.js";
import type { DomainInstaller } from "../model/domain-install.js";
import { anonymous, authenticated } from "../model/permission.js";
import { ProjectionReadmodel } from "../readmodel/projection-readmodel.js";
import {
  Account,
  AccountAggregate,
  CredentialAggregate,
  SessionAggregate,
  SessionEnded,
  type SessionModel,
  SessionStarted,
} from "./account-domain.js";
import { loadEmailClaim } from "./email-claims.js";
import { credentialUuidOf } from "./ids.js";
import { accountIdentities } from "./identity.js";
import type { AccountIdentity } from "./identity-domain.js";
import { clearLoginFailures, noteLoginFailure, takeLoginAttempt } from "./login-limiter.js";
import { dummyPasswordHash, type PasswordHash, verifyPassword } from "./password.js";
import { loginPasswordSchema, objectSchema } from "./payload-schemas.js";
import { READMODELS } from "./readmodel-names.js";
import { hashSessionKey, newSessionKey, SESSION_KEY_HASH_ALGORITHM, sessionKeyMatches } from "./session-key.js";
import type { DefaultsSettings } from "./settings.js";

export { SessionAggregate, type SessionModel } from "./account-domain.js";

/** Payload of the `Account.Login` command. */
export interface Login {
  email: string;
  password: string;
}
/** Payload of the `Account.Logout` command. */
export type Logout = Record<string, never>;

/** What Login returns to its caller (and nowhere else): the only place the session key ever appears. */
export interface LoginResult {
  sessionUuid: string;
  sessionKey: string;
  /** `<sessionUuid>.<sessionKey>`, for `Authorization: Bearer`. */
  token: string;
  accountUuid: string;
  /** ns since the epoch. */
  expiresAt: number;
  identities: AccountIdentity[];
}

/** The `Account.Login` command token. */
export const Login = Account.command<Login, LoginResult>("Login", {
  description: "Start a session with email and password (anonymous); the result holds the session key",
  permission: anonymous,
  secretFields: ["password", "email"],
  // Any string is accepted as an email here: a malformed one fails like an unknown one.
  schema: objectSchema({ email: { type: "string", maxLength: 320 }, password: loginPasswordSchema }, ["email", "password"]),
});
/** The `Account.Logout` command token. */
export const Logout = Account.command<Logout>("Logout", {
  description: "End the sender's session (authenticated)",
  permission: authenticated,
  schema: objectSchema({}),
});

/**
 * The Session readmodel: one model per session (account, keyed hash, expiry,
 * end). It holds the facade's session settings (the key secret, the clock),
 * given by registerDefaults, so it can tell whether a presented key opens a
 * session: resolveCredentials asks it.
 */
export class SessionProjection extends ProjectionReadmodel<SessionModel> {
  readonly #settings: Pick<DefaultsSettings, "sessionSecret" | "clock">;
  readonly #loadCommitted: (sessionUuid: string) => Promise<{ state: SessionModel; version: number }>;
  readonly #loadAccount: (accountUuid: string) => Promise<{ state: { removed: boolean }; version: number }>;

  constructor(facade: Facade, settings: Pick<DefaultsSettings, "sessionSecret" | "clock">) {
    super(facade, { aggregate: SessionAggregate, name: READMODELS.session });
    this.#settings = settings;
    this.#loadCommitted = (sessionUuid) => facade.loadAggregate(SessionAggregate, sessionUuid);
    this.#loadAccount = (accountUuid) => facade.loadAggregate(AccountAggregate, accountUuid);
  }

  /** Whether the account exists and is not removed, from its committed events (for an account the Account readmodel lags on). */
  async accountLives(accountUuid: string): Promise<boolean> {
    const { state, version } = await this.#loadAccount(accountUuid);
    return version > 0 && !state.removed;
  }

  /**
   * The session `sessionKey` opens: undefined when it is unknown, ended,
   * expired, or the key is wrong (compared in constant time). Read from the
   * session's committed events, not from this readmodel: a login or a logout
   * on any instance counts on every instance from the moment it returns,
   * however far this instance's documents lag (the in-process aggregate cache
   * makes it one read of the events after the cached version).
   */
  async openSession(sessionUuid: string, sessionKey: string): Promise<SessionModel | undefined> {
    const settings = this.#settings;
    const { state: s, version } = await this.#loadCommitted(sessionUuid);
    // The key is hashed and checked before anything else is told apart (an unknown session has no hash and
    // matches nothing), so neither a wrong key nor an unknown session learns anything, nor takes less time.
    if (!sessionKeyMatches(sessionKey, s.keyHash, settings.sessionSecret) || version === 0) return undefined;
    if (s.endedAt !== 0 || s.expiresAt <= settings.clock()) return undefined;
    return s;
  }
}

/** The one error of every failed login: it does not say whether the email exists. */
function loginFailed(): MnemeError {
  return new MnemeError("UNAUTHENTICATED", "invalid email or password");
}

/** Attaches Login and Logout in one facade, with its settings (part of the Account domain's install step). */
export function installSessions(d: DomainInstaller, state: DefaultsSettings): void {
  // Made on the first login of an unknown email, then kept (a failed derivation is retried next time).
  let dummyHash: Promise<PasswordHash> | undefined;
  const dummy = (): Promise<PasswordHash> => {
    if (dummyHash === undefined) {
      const h = dummyPasswordHash(state.scrypt);
      h.catch(() => {
        if (dummyHash === h) dummyHash = undefined;
      });
      dummyHash = h;
    }
    return dummyHash;
  };
  d.handleCommand(Login, async (ctx, _cmd, p) => {
    const email = typeof p.email === "string" ? p.email.trim().toLowerCase() : "";
    const claim = await loadEmailClaim(ctx, state, email);
    const attempt = await takeLoginAttempt(state, email);
    const accountUuid = claim.accountUuid;
    const credential =
      accountUuid === "" ? undefined : (await ctx.aggregates.load(CredentialAggregate, credentialUuidOf(accountUuid))).state.hash;
    // An unknown email costs one scrypt like a known one, so timing does not tell them apart either.
    const ok = await verifyPassword(p.password, credential ?? (await dummy()));
    if (!ok || credential === undefined) {
      await noteLoginFailure(state, email, attempt);
      throw loginFailed();
    }
    await clearLoginFailures(state, email);
    const sessionUuid = newUuid();
    const sessionKey = newSessionKey();
    const expiresAt = state.clock() + state.sessionTtlNs;
    const started = SessionStarted.create(
      sessionUuid,
      {
        accountUuid,
        keyHash: hashSessionKey(sessionKey, state.sessionSecret),
        hashAlgorithm: SESSION_KEY_HASH_ALGORITHM,
        expiresAt,
      },
      { tenantUuid: "" },
    );
    const result: LoginResult = {
      sessionUuid,
      sessionKey,
      token: `${sessionUuid}.${sessionKey}`,
      accountUuid,
      expiresAt,
      identities: await accountIdentities(ctx.facade, accountUuid),
    };
    return { events: [started], result };
  });

  d.handleCommand(Logout, async (ctx) => {
    const sessionUuid = ctx.reqCtx.senderSessionUuid!;
    const session = await ctx.aggregates.load(SessionAggregate, sessionUuid);
    if (session.version === 0 || session.state.accountUuid !== ctx.reqCtx.senderAccountUuid) {
      throw new MnemeError("NOT_FOUND", "the sender's session does not exist");
    }
    if (session.state.endedAt !== 0) return [];
    return [SessionEnded.create(sessionUuid, { reason: "logout" }, { tenantUuid: "" })];
  });
}
