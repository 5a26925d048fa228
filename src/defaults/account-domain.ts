/**
 * The `Account` domain's definitions: its events and the aggregates built from
 * them (account, email claim, credential, session). Commands and handlers live
 * in account.ts and session.ts.
 */
import { defineDomain } from "../model/domain.js";
import type { NewEvent } from "../model/types.js";
import type { PasswordHash } from "./password.js";

/** Accounts, their credentials and their sessions. */
export const Account = defineDomain("Account", { description: "Accounts: registration, profile, password, login sessions" });

/** Payload of the `Account.AccountRegistered` event. */
export interface AccountRegistered {
  email: string;
  name: string;
  /** The email's claim aggregate (absent in events written before claims were keyed). */
  emailClaimUuid?: string;
}
/** Payload of the `Account.AccountEmailChanged` event. */
export interface AccountEmailChanged {
  email: string;
  previousEmail: string;
  /** The new email's claim aggregate (absent in events written before claims were keyed). */
  emailClaimUuid?: string;
}
/** Payload of the `Account.AccountNameChanged` event. */
export interface AccountNameChanged {
  name: string;
}
/** The fact only: the hash goes to the account's credential aggregate, so history never shows it. */
export type AccountPasswordChanged = Record<string, never>;
/** Payload of the `Account.AccountRemoved` event. */
export interface AccountRemoved {
  /** True when the account's personal data was erased with it (`RemoveAccount { erase: true }`). */
  erased?: boolean;
}
/** Payload of the `Account.AccountErased` event: the fact only. */
export type AccountErased = Record<string, never>;
/** Payload of the `Account.EmailClaimed` event. */
export interface EmailClaimed {
  accountUuid: string;
  email: string;
}
/** Payload of the `Account.EmailReleased` event. */
export interface EmailReleased {
  accountUuid: string;
}
/** Payload of the `Account.CredentialSet` event. */
export interface CredentialSet extends PasswordHash {
  accountUuid: string;
}
/** Payload of the `Account.SessionStarted` event. */
export interface SessionStarted {
  accountUuid: string;
  /** HMAC-SHA256 of the session key (base64url); the key itself is returned once, by Login. */
  keyHash: string;
  hashAlgorithm: string;
  /** ns since the epoch. */
  expiresAt: number;
}
/** Payload of the `Account.SessionEnded` event. */
export interface SessionEnded {
  reason: "logout" | "password-changed" | "account-removed";
}

/** The account is the data subject of its email and name. */
const ofTheAccount = (_p: unknown, e: Readonly<NewEvent>): string => e.aggregateUuid;

/** The `Account.AccountRegistered` event token (email and name are personal data of the account). */
export const AccountRegistered = Account.event<AccountRegistered>("AccountRegistered", {
  description: "An account was registered",
  personalData: { subject: ofTheAccount, fields: ["email", "name"] },
});
/** The `Account.AccountEmailChanged` event token (both emails are personal data of the account). */
export const AccountEmailChanged = Account.event<AccountEmailChanged>("AccountEmailChanged", {
  description: "An account's email changed",
  personalData: { subject: ofTheAccount, fields: ["email", "previousEmail"] },
});
/** The `Account.AccountNameChanged` event token (the name is personal data of the account). */
export const AccountNameChanged = Account.event<AccountNameChanged>("AccountNameChanged", {
  description: "An account's display name changed",
  personalData: { subject: ofTheAccount, fields: ["name"] },
});
/** The `Account.AccountPasswordChanged` event token. */
export const AccountPasswordChanged = Account.event<AccountPasswordChanged>("AccountPasswordChanged", {
  description: "An account's password changed (the hash is in CredentialSet)",
});
/** The `Account.AccountRemoved` event token. */
export const AccountRemoved = Account.event<AccountRemoved>("AccountRemoved", { description: "An account was removed" });
/**
 * The `Account.AccountErased` event token: the account's key was deleted
 * (`facade.forget(accountUuid)`) while the account lives on; its email and
 * name fold to "[erased]", so the Account projection drops them too.
 */
export const AccountErased = Account.event<AccountErased>("AccountErased", {
  description: "An account's personal data (email, name) was erased; the account lives on",
});
/** The `Account.EmailClaimed` event token (the email is personal data of the claiming account). */
export const EmailClaimed = Account.event<EmailClaimed>("EmailClaimed", {
  description: "An email was claimed by an account",
  personalData: { subject: (p) => p.accountUuid, fields: ["email"] },
});
/** The `Account.EmailReleased` event token. */
export const EmailReleased = Account.event<EmailReleased>("EmailReleased", { description: "An email was released by its account" });
/** The `Account.CredentialSet` event token. */
export const CredentialSet = Account.event<CredentialSet>("CredentialSet", {
  description: "An account's password hash (scrypt, salt, parameters) was set",
});
/** The `Account.SessionStarted` event token. */
export const SessionStarted = Account.event<SessionStarted>("SessionStarted", { description: "A login started a session" });
/** The `Account.SessionEnded` event token. */
export const SessionEnded = Account.event<SessionEnded>("SessionEnded", { description: "A session ended" });

/** The account as served: no secret and no hash. Email and name read "[erased]" once the account's personal data was erased. */
export interface AccountModel {
  email: string;
  name: string;
  removed: boolean;
  /** ns: when the password was last set. */
  passwordSetAt: number;
  /** The claim aggregate of the current email ("" for accounts registered before claims were keyed: derive it from the email). */
  emailClaimUuid: string;
}

/** What erased personal fields read as. */
export const ERASED_TEXT = "[erased]";

/** The `Account.Account` aggregate: its state folded from its events. */
export const AccountAggregate = Account.aggregate<AccountModel>("Account", {
  tenancy: "global",
  initialState: () => ({ email: "", name: "", removed: false, passwordSetAt: 0, emailClaimUuid: "" }),
  evolve: {
    AccountRegistered: (s, p: AccountRegistered, e) => ({
      ...s,
      email: p.email,
      name: p.name,
      removed: false,
      passwordSetAt: e.createdAt,
      emailClaimUuid: p.emailClaimUuid ?? "",
    }),
    AccountEmailChanged: (s, p: AccountEmailChanged) => ({ ...s, email: p.email, emailClaimUuid: p.emailClaimUuid ?? "" }),
    AccountNameChanged: (s, p: AccountNameChanged) => ({ ...s, name: p.name }),
    AccountPasswordChanged: (s, _p, e) => ({ ...s, passwordSetAt: e.createdAt }),
    AccountErased: (s) => ({ ...s, email: ERASED_TEXT, name: ERASED_TEXT }),
    AccountRemoved: (s, p: AccountRemoved) =>
      p.erased === true ? { ...s, removed: true, email: ERASED_TEXT, name: ERASED_TEXT } : { ...s, removed: true },
  },
});

/** Who holds an email now ("" when nobody). */
export interface EmailClaimState {
  accountUuid: string;
}

/** The `Account.EmailClaim` aggregate: its state folded from its events. */
export const EmailClaimAggregate = Account.aggregate<EmailClaimState>("EmailClaim", {
  tenancy: "global",
  initialState: () => ({ accountUuid: "" }),
  evolve: {
    EmailClaimed: (_s, p: EmailClaimed) => ({ accountUuid: p.accountUuid }),
    EmailReleased: () => ({ accountUuid: "" }),
  },
});

/** The current password hash of an account (undefined before the first). */
export interface CredentialState {
  hash: PasswordHash | undefined;
}

/** The `Account.Credential` aggregate: its state folded from its events. */
export const CredentialAggregate = Account.aggregate<CredentialState>("Credential", {
  tenancy: "global",
  initialState: () => ({ hash: undefined }),
  evolve: {
    CredentialSet: (_s, p: CredentialSet) => ({
      hash: { algorithm: p.algorithm, N: p.N, r: p.r, p: p.p, keyLength: p.keyLength, salt: p.salt, hash: p.hash },
    }),
  },
});

/** A session as the Session readmodel keeps it. */
export interface SessionModel {
  accountUuid: string;
  keyHash: string;
  hashAlgorithm: string;
  /** ns */
  expiresAt: number;
  /** ns; 0 while the session is open. */
  endedAt: number;
  endReason: string;
}

/** The `Account.Session` aggregate: its state folded from its events. */
export const SessionAggregate = Account.aggregate<SessionModel>("Session", {
  tenancy: "global",
  initialState: () => ({ accountUuid: "", keyHash: "", hashAlgorithm: "", expiresAt: 0, endedAt: 0, endReason: "" }),
  evolve: {
    SessionStarted: (_s, p: SessionStarted) => ({
      accountUuid: p.accountUuid,
      keyHash: p.keyHash,
      hashAlgorithm: p.hashAlgorithm,
      expiresAt: p.expiresAt,
      endedAt: 0,
      endReason: "",
    }),
    SessionEnded: (s, p: SessionEnded, e) => (s.endedAt !== 0 ? s : { ...s, endedAt: e.createdAt, endReason: p.reason }),
  },
});
