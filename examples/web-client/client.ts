/**
 * The typed client of ticket-board 1.0.0, written by `mneme client` from its OpenAPI document.
 * Dependency-free (it uses fetch). Do not edit: run `mneme client` again when the app's messages change.
 */

/* eslint-disable */

/** Runtime.GetSchema */
export type Runtime_GetSchema = {
  domain: string;
  type: string;
};

/** Runtime.ControlEventHandler */
export type Runtime_ControlEventHandler = {
  /** "restore", "start" or "stop"; anything else is INVALID_ACTION */
  action?: unknown;
  eventHandlerName: string;
  restoreFromZero?: boolean;
};

/** Runtime.CancelScheduledCommand */
export type Runtime_CancelScheduledCommand = {
  commandUuid: string;
  eventHandlerName?: string;
};

/** Runtime.ControlDeadLetter */
export type Runtime_ControlDeadLetter = {
  /** "retry" or "discard"; anything else is INVALID_ACTION */
  action?: unknown;
  id: string;
  eventHandlerName?: string;
};

/** Runtime.StoreUpdate */
export type Runtime_StoreUpdate = {
  store: "event" | "command" | "data" | "cache" | "log";
  key: string;
  value: unknown;
};

/** Runtime.StoreDelete */
export type Runtime_StoreDelete = {
  store: "event" | "command" | "data" | "cache" | "log";
  key: string;
};

/** Runtime.MigratePersonalData */
export type Runtime_MigratePersonalData = {
  dryRun?: boolean;
  batchSize?: number;
};

/** Runtime.FinishRollingUpgrade */
export type Runtime_FinishRollingUpgrade = {
  batchSize?: number;
  settleMs?: number;
};

/** Runtime.ForgetSubject */
export type Runtime_ForgetSubject = {
  /** The data subject, as `personalData.subject` names it */
  subjectUuid: string;
};

/** Runtime.ApplyRetention */
export type Runtime_ApplyRetention = {
  dryRun?: boolean;
  batchSize?: number;
};

/** Board.OpenTicket */
export type Board_OpenTicket = {
  ticketUuid: string;
  title: string;
};

/** Board.CloseTicket */
export type Board_CloseTicket = {
  ticketUuid: string;
};

/** Tenant.CreateTenant */
export type Tenant_CreateTenant = {
  tenantUuid?: string;
  name: string;
};

/** Tenant.RenameTenant */
export type Tenant_RenameTenant = {
  tenantUuid: string;
  name: string;
};

/** Tenant.RemoveTenant */
export type Tenant_RemoveTenant = {
  tenantUuid: string;
};

/** Tenant.BootstrapSystemTenant */
export type Tenant_BootstrapSystemTenant = {
  email: string;
  password: string;
  name: string;
  tenantName: string;
};

/** Account.RegisterAccount */
export type Account_RegisterAccount = {
  email: string;
  password: string;
  name?: string;
};

/** Account.ChangeAccountEmail */
export type Account_ChangeAccountEmail = {
  accountUuid: string;
  email: string;
};

/** Account.ChangeAccountName */
export type Account_ChangeAccountName = {
  accountUuid: string;
  name: string;
};

/** Account.SetAccountPassword */
export type Account_SetAccountPassword = {
  accountUuid: string;
  password: string;
  currentPassword?: string;
};

/** Account.RemoveAccount */
export type Account_RemoveAccount = {
  accountUuid: string;
  erase?: boolean;
};

/** Account.Login */
export type Account_Login = {
  email: string;
  password: string;
};

/** Account.Logout */
export type Account_Logout = Record<string, never>;

/** Identity.CreateIdentity */
export type Identity_CreateIdentity = {
  accountUuid: string;
  tenantUuid?: string;
};

/** Identity.RemoveIdentity */
export type Identity_RemoveIdentity = {
  identityUuid: string;
};

/** Identity.AssignGroup */
export type Identity_AssignGroup = {
  identityUuid: string;
  groupUuid: string;
};

/** Identity.UnassignGroup */
export type Identity_UnassignGroup = {
  identityUuid: string;
  groupUuid: string;
};

/** Group.CreateGroup */
export type Group_CreateGroup = {
  groupUuid?: string;
  tenantUuid?: string;
  name: string;
  permissions?: string[];
};

/** Group.RenameGroup */
export type Group_RenameGroup = {
  groupUuid: string;
  name: string;
};

/** Group.AddGroupPermission */
export type Group_AddGroupPermission = {
  groupUuid: string;
  permission: string;
};

/** Group.RemoveGroupPermission */
export type Group_RemoveGroupPermission = {
  groupUuid: string;
  permission: string;
};

/** Group.RemoveGroup */
export type Group_RemoveGroup = {
  groupUuid: string;
};

/** Runtime.ListCommands */
export type Runtime_ListCommands = Record<string, never>;

/** Runtime.ListQueries */
export type Runtime_ListQueries = Record<string, never>;

/** Runtime.ListEvents */
export type Runtime_ListEvents = Record<string, never>;

/** Runtime.ListCommandHandlers */
export type Runtime_ListCommandHandlers = Record<string, never>;

/** Runtime.ListQueryHandlers */
export type Runtime_ListQueryHandlers = Record<string, never>;

/** Runtime.ListEventHandlers */
export type Runtime_ListEventHandlers = {
  /** Every tenant's entries, not only the effective tenant's (system administrators) */
  allTenants?: boolean;
};

/** Runtime.GetSystemInfo */
export type Runtime_GetSystemInfo = Record<string, never>;

/** Runtime.ListPermissions */
export type Runtime_ListPermissions = {
  domain?: string;
};

/** Runtime.GetMetrics */
export type Runtime_GetMetrics = {
  eventHandlerName?: string;
  /** Every tenant's entries, not only the effective tenant's (system administrators) */
  allTenants?: boolean;
};

/** Runtime.ListScheduledCommands */
export type Runtime_ListScheduledCommands = {
  eventHandlerName?: string;
  tenantUuid?: string;
  /** Every tenant's entries, not only the effective tenant's (system administrators) */
  allTenants?: boolean;
  limit?: number;
};

/** Runtime.ListDeadLetters */
export type Runtime_ListDeadLetters = {
  eventHandlerName?: string;
  tenantUuid?: string;
  /** Every tenant's entries, not only the effective tenant's (system administrators) */
  allTenants?: boolean;
  limit?: number;
};

/** Runtime.ListFailures */
export type Runtime_ListFailures = {
  eventHandlerName?: string;
  tenantUuid?: string;
  /** Every tenant's entries, not only the effective tenant's (system administrators) */
  allTenants?: boolean;
  limit?: number;
};

/** Runtime.StreamSystemEvents */
export type Runtime_StreamSystemEvents = Record<string, never>;

/** Runtime.SubscribeEvents */
export type Runtime_SubscribeEvents = {
  types: string[];
  allTenants: boolean;
};

/** Runtime.StoreInfo */
export type Runtime_StoreInfo = {
  store: "event" | "command" | "data" | "cache" | "log";
};

/** Runtime.StoreRead */
export type Runtime_StoreRead = {
  store: "event" | "command" | "data" | "cache" | "log";
  cursor?: string;
  limit?: number;
  /** Every tenant's entries, not only the effective tenant's (system administrators) */
  allTenants?: boolean;
};

/** Runtime.GetClearPersonalData */
export type Runtime_GetClearPersonalData = Record<string, never>;

/** Board.ListOpenTickets */
export type Board_ListOpenTickets = Record<string, never>;

/** Board.ListOpenTickets.Result */
export type Board_ListOpenTickets_Result = {
  tickets: {
    ticketUuid: string;
    title: string;
    openedAt: number;
  }[];
};

/** Tenant.GetTenant */
export type Tenant_GetTenant = {
  tenantUuid: string;
  includeHistory?: boolean;
};

/** Tenant.ListTenants */
export type Tenant_ListTenants = {
  page?: number;
  pageSize?: number;
  includeHistory?: boolean;
};

/** Account.GetAccount */
export type Account_GetAccount = {
  accountUuid: string;
  includeHistory?: boolean;
};

/** Account.ListAccounts */
export type Account_ListAccounts = {
  page?: number;
  pageSize?: number;
  includeHistory?: boolean;
};

/** Account.GetAccountByEmail */
export type Account_GetAccountByEmail = {
  email: string;
  includeHistory?: boolean;
};

/** Identity.GetIdentity */
export type Identity_GetIdentity = {
  identityUuid: string;
  includeHistory?: boolean;
};

/** Identity.ListIdentities */
export type Identity_ListIdentities = {
  tenantUuid?: string;
  page?: number;
  pageSize?: number;
  includeHistory?: boolean;
};

/** Identity.ListAccountIdentities */
export type Identity_ListAccountIdentities = {
  accountUuid: string;
};

/** Group.GetGroup */
export type Group_GetGroup = {
  groupUuid: string;
  includeHistory?: boolean;
};

/** Group.ListGroups */
export type Group_ListGroups = {
  tenantUuid?: string;
  page?: number;
  pageSize?: number;
  includeHistory?: boolean;
};


/** An RFC 9457 problem document as mneme/http answers it; code is the MnemeError code. */
export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly code: string;
  /** Validation failures: one per failing JSON pointer of the payload. */
  readonly errors?: readonly { readonly pointer: string; readonly message: string }[];
}

/** What every call answers: the value, or the problem the server answered with. */
export type Result<T> =
  | { readonly ok: true; readonly status: number; readonly value: T }
  | { readonly ok: false; readonly status: number; readonly problem: Problem };

/** The answer to a command. */
export interface CommandResponse<R = unknown> {
  readonly commandUuid: string;
  /** The events the command appended. */
  readonly events: readonly { readonly name: string; readonly version?: number; readonly aggregateUuid?: string; readonly payload?: unknown }[];
  /** What the command handler returned, when it returned something (never on a replay). */
  readonly result?: R;
  /** True when an earlier call with the same idempotency key ran it: nothing ran again. */
  readonly replayed?: true;
  /** With wait: the event handlers that failed on the command's events. */
  readonly handlerErrors?: readonly { readonly eventHandlerName: string; readonly message: string }[];
}

/** How the client reaches the app and who it is. */
export interface ClientOptions {
  /** Where the app is served, e.g. "https://todo.example" (the paths already hold the app's basePath). */
  readonly baseUrl: string;
  /** The tenant of every call that names none. */
  readonly tenantUuid?: string;
  /** The session token of a login ("<sessionUuid>.<sessionKey>"), or a function that gives the current one. */
  readonly token?: string | (() => string | undefined | Promise<string | undefined>);
  /** The identity the caller acts as (X-Identity-Uuid); authorized permissions need one. */
  readonly identityUuid?: string;
  /** fetch's credentials mode: "include" sends the session cookie of a browser (then cookies authenticate). */
  readonly credentials?: "omit" | "same-origin" | "include";
  /** Another fetch (a test's, one with a proxy); default globalThis.fetch. */
  readonly fetch?: (input: string, init: RequestInit) => Promise<Response>;
  /** Headers sent with every call. */
  readonly headers?: Readonly<Record<string, string>>;
  /** How often a call that may be repeated is retried when the server cannot be reached or answers 503. Default 2. */
  readonly retries?: number;
}

/** Options of one call. */
export interface CallOptions {
  /** The tenant of this call (default: the client's). */
  readonly tenantUuid?: string;
  readonly signal?: AbortSignal;
  /** Headers of this call. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Overrides the client's retries for this call. */
  readonly retries?: number;
}

/** Options of one command. */
export interface CommandCallOptions extends CallOptions {
  /** Answer once the event handlers have applied the command's events (?wait=true). */
  readonly wait?: boolean;
  /**
   * The Idempotency-Key: a retry with the same key replays the first outcome instead of running again.
   * Default: a fresh key per call when the client has credentials and the command is not anonymous
   * (keys are kept per signed-in account), so the client's own retries never run a command twice.
   * false: no key (and then no retry either).
   */
  readonly idempotencyKey?: string | false;
  /** Optimistic concurrency: the version the target aggregate must have (else 409 CONFLICT). */
  readonly expectedVersion?: { readonly version: number; readonly aggregateUuid?: string };
}

interface Operation {
  readonly kind: "command" | "query";
  /** Domain.Name */
  readonly name: string;
  readonly path: string;
  /** Anonymous permission: no idempotency key by default (the server keeps keys per account). */
  readonly anonymous: boolean;
}

async function send<T>(options: ClientOptions, op: Operation, payload: unknown, call: CommandCallOptions = {}): Promise<Result<T>> {
  const tenantUuid = call.tenantUuid ?? options.tenantUuid;
  if (tenantUuid === undefined || tenantUuid === "") throw new TypeError(op.name + ": no tenantUuid: give one to createClient or to the call");
  let url = options.baseUrl.replace(/\/+$/, "") + op.path.replace("{tenantUuid}", encodeURIComponent(tenantUuid));
  if (op.kind === "command" && call.wait === true) url += "?wait=true";
  const headers: Record<string, string> = { accept: "application/json", "content-type": "application/json", ...options.headers, ...call.headers };
  const token = typeof options.token === "function" ? await options.token() : options.token;
  if (token !== undefined) headers["authorization"] = "Bearer " + token;
  if (options.identityUuid !== undefined) headers["x-identity-uuid"] = options.identityUuid;
  let retries = call.retries ?? options.retries ?? 2;
  if (op.kind === "command") {
    const signedIn = token !== undefined || options.credentials === "include";
    const key = call.idempotencyKey ?? (op.anonymous || !signedIn ? false : newKey());
    if (key === false) retries = 0; // without a key a repeated command could run twice
    else headers["idempotency-key"] = key;
    if (call.expectedVersion !== undefined) {
      headers["x-target-aggregate-version"] = String(call.expectedVersion.version);
      if (call.expectedVersion.aggregateUuid !== undefined) headers["x-target-aggregate-uuid"] = call.expectedVersion.aggregateUuid;
    }
  }
  const init: RequestInit = { method: "POST", headers, body: JSON.stringify(payload ?? {}) };
  if (options.credentials !== undefined) init.credentials = options.credentials;
  if (call.signal !== undefined) init.signal = call.signal;
  const fetchFn = options.fetch ?? ((input: string, i: RequestInit) => globalThis.fetch(input, i));
  for (let attempt = 0; ; attempt++) {
    let response: Response;
    try {
      response = await fetchFn(url, init);
    } catch (e) {
      if (attempt >= retries || call.signal?.aborted === true) throw e;
      await pause(attempt);
      continue;
    }
    if (response.status === 503 && attempt < retries) {
      await response.body?.cancel();
      await pause(attempt);
      continue;
    }
    return answer<T>(response);
  }
}

async function answer<T>(response: Response): Promise<Result<T>> {
  const text = await response.text();
  let body: unknown = undefined;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (response.ok) return { ok: true, status: response.status, value: body as T };
  const problem: Problem = isProblem(body)
    ? body
    : { type: "about:blank", title: response.statusText, status: response.status, detail: text.slice(0, 500), code: "HTTP_" + response.status };
  return { ok: false, status: response.status, problem };
}

function isProblem(v: unknown): v is Problem {
  return typeof v === "object" && v !== null && typeof (v as Problem).code === "string" && typeof (v as Problem).status === "number";
}

/** A fresh idempotency key: a random UUID. */
function newKey(): string {
  return globalThis.crypto.randomUUID();
}

/** 100 ms, 200 ms, 400 ms, ... up to 2 s between attempts. */
function pause(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** attempt)));
}

const OPERATIONS: readonly Operation[] = [
  { kind: "command", name: "Runtime.ControlEventHandler", path: "/api/tenants/{tenantUuid}/commands/Runtime/ControlEventHandler", anonymous: false },
  { kind: "command", name: "Runtime.CancelScheduledCommand", path: "/api/tenants/{tenantUuid}/commands/Runtime/CancelScheduledCommand", anonymous: false },
  { kind: "command", name: "Runtime.ControlDeadLetter", path: "/api/tenants/{tenantUuid}/commands/Runtime/ControlDeadLetter", anonymous: false },
  { kind: "command", name: "Runtime.StoreUpdate", path: "/api/tenants/{tenantUuid}/commands/Runtime/StoreUpdate", anonymous: false },
  { kind: "command", name: "Runtime.StoreDelete", path: "/api/tenants/{tenantUuid}/commands/Runtime/StoreDelete", anonymous: false },
  { kind: "command", name: "Runtime.MigratePersonalData", path: "/api/tenants/{tenantUuid}/commands/Runtime/MigratePersonalData", anonymous: false },
  { kind: "command", name: "Runtime.FinishRollingUpgrade", path: "/api/tenants/{tenantUuid}/commands/Runtime/FinishRollingUpgrade", anonymous: false },
  { kind: "command", name: "Runtime.ForgetSubject", path: "/api/tenants/{tenantUuid}/commands/Runtime/ForgetSubject", anonymous: false },
  { kind: "command", name: "Runtime.ApplyRetention", path: "/api/tenants/{tenantUuid}/commands/Runtime/ApplyRetention", anonymous: false },
  { kind: "command", name: "Board.OpenTicket", path: "/api/tenants/{tenantUuid}/commands/Board/OpenTicket", anonymous: false },
  { kind: "command", name: "Board.CloseTicket", path: "/api/tenants/{tenantUuid}/commands/Board/CloseTicket", anonymous: false },
  { kind: "command", name: "Tenant.CreateTenant", path: "/api/tenants/{tenantUuid}/commands/Tenant/CreateTenant", anonymous: false },
  { kind: "command", name: "Tenant.RenameTenant", path: "/api/tenants/{tenantUuid}/commands/Tenant/RenameTenant", anonymous: false },
  { kind: "command", name: "Tenant.RemoveTenant", path: "/api/tenants/{tenantUuid}/commands/Tenant/RemoveTenant", anonymous: false },
  { kind: "command", name: "Tenant.BootstrapSystemTenant", path: "/api/tenants/{tenantUuid}/commands/Tenant/BootstrapSystemTenant", anonymous: false },
  { kind: "command", name: "Account.RegisterAccount", path: "/api/tenants/{tenantUuid}/commands/Account/RegisterAccount", anonymous: true },
  { kind: "command", name: "Account.ChangeAccountEmail", path: "/api/tenants/{tenantUuid}/commands/Account/ChangeAccountEmail", anonymous: false },
  { kind: "command", name: "Account.ChangeAccountName", path: "/api/tenants/{tenantUuid}/commands/Account/ChangeAccountName", anonymous: false },
  { kind: "command", name: "Account.SetAccountPassword", path: "/api/tenants/{tenantUuid}/commands/Account/SetAccountPassword", anonymous: false },
  { kind: "command", name: "Account.RemoveAccount", path: "/api/tenants/{tenantUuid}/commands/Account/RemoveAccount", anonymous: false },
  { kind: "command", name: "Account.Login", path: "/api/tenants/{tenantUuid}/commands/Account/Login", anonymous: true },
  { kind: "command", name: "Account.Logout", path: "/api/tenants/{tenantUuid}/commands/Account/Logout", anonymous: false },
  { kind: "command", name: "Identity.CreateIdentity", path: "/api/tenants/{tenantUuid}/commands/Identity/CreateIdentity", anonymous: false },
  { kind: "command", name: "Identity.RemoveIdentity", path: "/api/tenants/{tenantUuid}/commands/Identity/RemoveIdentity", anonymous: false },
  { kind: "command", name: "Identity.AssignGroup", path: "/api/tenants/{tenantUuid}/commands/Identity/AssignGroup", anonymous: false },
  { kind: "command", name: "Identity.UnassignGroup", path: "/api/tenants/{tenantUuid}/commands/Identity/UnassignGroup", anonymous: false },
  { kind: "command", name: "Group.CreateGroup", path: "/api/tenants/{tenantUuid}/commands/Group/CreateGroup", anonymous: false },
  { kind: "command", name: "Group.RenameGroup", path: "/api/tenants/{tenantUuid}/commands/Group/RenameGroup", anonymous: false },
  { kind: "command", name: "Group.AddGroupPermission", path: "/api/tenants/{tenantUuid}/commands/Group/AddGroupPermission", anonymous: false },
  { kind: "command", name: "Group.RemoveGroupPermission", path: "/api/tenants/{tenantUuid}/commands/Group/RemoveGroupPermission", anonymous: false },
  { kind: "command", name: "Group.RemoveGroup", path: "/api/tenants/{tenantUuid}/commands/Group/RemoveGroup", anonymous: false },
  { kind: "query", name: "Runtime.ListCommands", path: "/api/tenants/{tenantUuid}/queries/Runtime/ListCommands", anonymous: false },
  { kind: "query", name: "Runtime.ListQueries", path: "/api/tenants/{tenantUuid}/queries/Runtime/ListQueries", anonymous: false },
  { kind: "query", name: "Runtime.ListEvents", path: "/api/tenants/{tenantUuid}/queries/Runtime/ListEvents", anonymous: false },
  { kind: "query", name: "Runtime.ListCommandHandlers", path: "/api/tenants/{tenantUuid}/queries/Runtime/ListCommandHandlers", anonymous: false },
  { kind: "query", name: "Runtime.ListQueryHandlers", path: "/api/tenants/{tenantUuid}/queries/Runtime/ListQueryHandlers", anonymous: false },
  { kind: "query", name: "Runtime.ListEventHandlers", path: "/api/tenants/{tenantUuid}/queries/Runtime/ListEventHandlers", anonymous: false },
  { kind: "query", name: "Runtime.GetSystemInfo", path: "/api/tenants/{tenantUuid}/queries/Runtime/GetSystemInfo", anonymous: false },
  { kind: "query", name: "Runtime.ListPermissions", path: "/api/tenants/{tenantUuid}/queries/Runtime/ListPermissions", anonymous: false },
  { kind: "query", name: "Runtime.GetMetrics", path: "/api/tenants/{tenantUuid}/queries/Runtime/GetMetrics", anonymous: false },
  { kind: "query", name: "Runtime.GetSchema", path: "/api/tenants/{tenantUuid}/queries/Runtime/GetSchema", anonymous: false },
  { kind: "query", name: "Runtime.ListScheduledCommands", path: "/api/tenants/{tenantUuid}/queries/Runtime/ListScheduledCommands", anonymous: false },
  { kind: "query", name: "Runtime.ListDeadLetters", path: "/api/tenants/{tenantUuid}/queries/Runtime/ListDeadLetters", anonymous: false },
  { kind: "query", name: "Runtime.ListFailures", path: "/api/tenants/{tenantUuid}/queries/Runtime/ListFailures", anonymous: false },
  { kind: "query", name: "Runtime.StreamSystemEvents", path: "/api/tenants/{tenantUuid}/queries/Runtime/StreamSystemEvents", anonymous: false },
  { kind: "query", name: "Runtime.SubscribeEvents", path: "/api/tenants/{tenantUuid}/queries/Runtime/SubscribeEvents", anonymous: false },
  { kind: "query", name: "Runtime.StoreInfo", path: "/api/tenants/{tenantUuid}/queries/Runtime/StoreInfo", anonymous: false },
  { kind: "query", name: "Runtime.StoreRead", path: "/api/tenants/{tenantUuid}/queries/Runtime/StoreRead", anonymous: false },
  { kind: "query", name: "Runtime.GetClearPersonalData", path: "/api/tenants/{tenantUuid}/queries/Runtime/GetClearPersonalData", anonymous: false },
  { kind: "query", name: "Board.ListOpenTickets", path: "/api/tenants/{tenantUuid}/queries/Board/ListOpenTickets", anonymous: false },
  { kind: "query", name: "Tenant.GetTenant", path: "/api/tenants/{tenantUuid}/queries/Tenant/GetTenant", anonymous: false },
  { kind: "query", name: "Tenant.ListTenants", path: "/api/tenants/{tenantUuid}/queries/Tenant/ListTenants", anonymous: false },
  { kind: "query", name: "Account.GetAccount", path: "/api/tenants/{tenantUuid}/queries/Account/GetAccount", anonymous: false },
  { kind: "query", name: "Account.ListAccounts", path: "/api/tenants/{tenantUuid}/queries/Account/ListAccounts", anonymous: false },
  { kind: "query", name: "Account.GetAccountByEmail", path: "/api/tenants/{tenantUuid}/queries/Account/GetAccountByEmail", anonymous: false },
  { kind: "query", name: "Identity.GetIdentity", path: "/api/tenants/{tenantUuid}/queries/Identity/GetIdentity", anonymous: false },
  { kind: "query", name: "Identity.ListIdentities", path: "/api/tenants/{tenantUuid}/queries/Identity/ListIdentities", anonymous: false },
  { kind: "query", name: "Identity.ListAccountIdentities", path: "/api/tenants/{tenantUuid}/queries/Identity/ListAccountIdentities", anonymous: false },
  { kind: "query", name: "Group.GetGroup", path: "/api/tenants/{tenantUuid}/queries/Group/GetGroup", anonymous: false },
  { kind: "query", name: "Group.ListGroups", path: "/api/tenants/{tenantUuid}/queries/Group/ListGroups", anonymous: false },
];

/**
 * A client of the app's commands and queries. Every call answers `{ ok: true, status, value }` or
 * `{ ok: false, status, problem }` (the problem document the server answered); it rejects only when
 * the server could not be reached (after the retries a call allows).
 */
export function createClient(options: ClientOptions) {
  return {
  commands: {
  Runtime: {
    /**
     * Restore (optionally from zero), start or stop an event handler (system administrators)
     *
     * Permission Runtime.ControlEventHandler: administrators (only the authorizer grants it).
     */
    ControlEventHandler: <R = unknown>(payload: Runtime_ControlEventHandler, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[0]!, payload, call),
    /**
     * Cancel a scheduled command that has not fired (system administrators)
     *
     * Permission Runtime.CancelScheduledCommand: administrators (only the authorizer grants it).
     */
    CancelScheduledCommand: <R = unknown>(payload: Runtime_CancelScheduledCommand, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[1]!, payload, call),
    /**
     * Retry or discard a dead letter of a process manager or reactor (system administrators)
     *
     * Permission Runtime.ControlDeadLetter: administrators (only the authorizer grants it).
     */
    ControlDeadLetter: <R = unknown>(payload: Runtime_ControlDeadLetter, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[2]!, payload, call),
    /**
     * Write a store entry (needs <Store>.Update)
     *
     * Permission Runtime.StoreUpdate: a custom function decides (Write a store entry (needs <Store>.Update)); a denial of a caller without a session is 401.
     */
    StoreUpdate: <R = unknown>(payload: Runtime_StoreUpdate, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[3]!, payload, call),
    /**
     * Delete a store entry (needs <Store>.Delete)
     *
     * Permission Runtime.StoreDelete: a custom function decides (Delete a store entry (needs <Store>.Delete)); a denial of a caller without a session is 401.
     */
    StoreDelete: <R = unknown>(payload: Runtime_StoreDelete, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[4]!, payload, call),
    /**
     * Seal personal data stored before it was declared, so forget erases it (system administrators)
     *
     * Permission Runtime.MigratePersonalData: administrators (only the authorizer grants it).
     */
    MigratePersonalData: <R = unknown>(payload?: Runtime_MigratePersonalData, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[5]!, payload, call),
    /**
     * End a rolling deploy's compatibility mode once the older instances are gone, then seal personal data (system administrators)
     *
     * Permission Runtime.FinishRollingUpgrade: administrators (only the authorizer grants it).
     */
    FinishRollingUpgrade: <R = unknown>(payload?: Runtime_FinishRollingUpgrade, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[6]!, payload, call),
    /**
     * Erase a data subject's personal data (system administrators, or a tenant's administrator for subjects whose events are all in its tenant)
     *
     * Permission Runtime.ForgetSubject: a custom function decides (Erase a data subject's personal data (system administrators, or a tenant's administrator for subjects whose events are all in its tenant)); a denial of a caller without a session is 401.
     */
    ForgetSubject: <R = unknown>(payload: Runtime_ForgetSubject, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[7]!, payload, call),
    /**
     * Remove expired events and log entries, recorded in the event chain; dryRun lists what would go (system administrators)
     *
     * Permission Runtime.ApplyRetention: administrators (only the authorizer grants it).
     */
    ApplyRetention: <R = unknown>(payload?: Runtime_ApplyRetention, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[8]!, payload, call),
  },
  Board: {
    /**
     * Open a ticket
     *
     * Permission Board.OpenTicket: Authorized.
     */
    OpenTicket: <R = unknown>(payload: Board_OpenTicket, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[9]!, payload, call),
    /**
     * Close a ticket
     *
     * Permission Board.CloseTicket: Authorized.
     */
    CloseTicket: <R = unknown>(payload: Board_CloseTicket, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[10]!, payload, call),
  },
  Tenant: {
    /**
     * Create a tenant (system administrators)
     *
     * Permission Tenant.CreateTenant: a custom function decides (Create a tenant (system administrators)); a denial of a caller without a session is 401.
     */
    CreateTenant: <R = unknown>(payload: Tenant_CreateTenant, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[11]!, payload, call),
    /**
     * Rename a tenant (its own members with the grant, or system administrators)
     *
     * Permission Tenant.RenameTenant: Authorized.
     */
    RenameTenant: <R = unknown>(payload: Tenant_RenameTenant, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[12]!, payload, call),
    /**
     * Remove a tenant (not the system tenant); its identities stop authorizing
     *
     * Permission Tenant.RemoveTenant: Authorized.
     */
    RemoveTenant: <R = unknown>(payload: Tenant_RemoveTenant, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[13]!, payload, call),
    /**
     * Create the system tenant, the system-admin group and the admin account and identity (runs inside facade.start() only)
     *
     * Permission Tenant.BootstrapSystemTenant: a custom function decides (Create the system tenant, the system-admin group and the admin account and identity (runs inside facade.start() only)); a denial of a caller without a session is 401.
     */
    BootstrapSystemTenant: <R = unknown>(payload: Tenant_BootstrapSystemTenant, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[14]!, payload, call),
  },
  Account: {
    /**
     * Register an account (anonymous)
     *
     * Permission Account.RegisterAccount: Anonymous (no credentials needed).
     */
    RegisterAccount: <R = unknown>(payload: Account_RegisterAccount, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[15]!, payload, call),
    /**
     * Change an account's email (the account itself, or system administrators)
     *
     * Permission Account.ChangeAccountEmail: a custom function decides (Change an account's email (the account itself, or system administrators)); a denial of a caller without a session is 401.
     */
    ChangeAccountEmail: <R = unknown>(payload: Account_ChangeAccountEmail, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[16]!, payload, call),
    /**
     * Change an account's display name (the account itself, or system administrators)
     *
     * Permission Account.ChangeAccountName: a custom function decides (Change an account's display name (the account itself, or system administrators)); a denial of a caller without a session is 401.
     */
    ChangeAccountName: <R = unknown>(payload: Account_ChangeAccountName, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[17]!, payload, call),
    /**
     * Set an account's password; the account itself gives its current one; other sessions end (the account itself, or system administrators)
     *
     * Permission Account.SetAccountPassword: a custom function decides (Set an account's password; the account itself gives its current one; other sessions end (the account itself, or system administrators)); a denial of a caller without a session is 401.
     */
    SetAccountPassword: <R = unknown>(payload: Account_SetAccountPassword, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[18]!, payload, call),
    /**
     * Remove an account: its email is freed, its sessions end; with erase, its email and name are erased (the account itself, or system administrators)
     *
     * Permission Account.RemoveAccount: a custom function decides (Remove an account: its email is freed, its sessions end; with erase, its email and name are erased (the account itself, or system administrators)); a denial of a caller without a session is 401.
     */
    RemoveAccount: <R = unknown>(payload: Account_RemoveAccount, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[19]!, payload, call),
    /**
     * Start a session with email and password (anonymous); the result holds the session key
     *
     * Permission Account.Login: Anonymous (no credentials needed).
     */
    Login: <R = unknown>(payload: Account_Login, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[20]!, payload, call),
    /**
     * End the sender's session (authenticated)
     *
     * Permission Account.Logout: Authenticated.
     */
    Logout: <R = unknown>(payload?: Account_Logout, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[21]!, payload, call),
  },
  Identity: {
    /**
     * Make an account a member of a tenant (members of the tenant with the grant, or system administrators)
     *
     * Permission Identity.CreateIdentity: Authorized.
     */
    CreateIdentity: <R = unknown>(payload: Identity_CreateIdentity, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[22]!, payload, call),
    /**
     * End an account's membership of a tenant (members of the tenant with the grant, or system administrators)
     *
     * Permission Identity.RemoveIdentity: Authorized.
     */
    RemoveIdentity: <R = unknown>(payload: Identity_RemoveIdentity, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[23]!, payload, call),
    /**
     * Give an identity a group of its tenant; the sender must hold the group's permissions (members of the tenant with the grant, or system administrators)
     *
     * Permission Identity.AssignGroup: Authorized.
     */
    AssignGroup: <R = unknown>(payload: Identity_AssignGroup, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[24]!, payload, call),
    /**
     * Take a group from an identity (members of the tenant with the grant, or system administrators)
     *
     * Permission Identity.UnassignGroup: Authorized.
     */
    UnassignGroup: <R = unknown>(payload: Identity_UnassignGroup, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[25]!, payload, call),
  },
  Group: {
    /**
     * Create a group in a tenant (members of the group's tenant with the grant, or system administrators)
     *
     * Permission Group.CreateGroup: Authorized.
     */
    CreateGroup: <R = unknown>(payload: Group_CreateGroup, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[26]!, payload, call),
    /**
     * Rename a group (members of the group's tenant with the grant, or system administrators)
     *
     * Permission Group.RenameGroup: Authorized.
     */
    RenameGroup: <R = unknown>(payload: Group_RenameGroup, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[27]!, payload, call),
    /**
     * Add a permission to a group; the sender must hold it (members of the group's tenant with the grant, or system administrators)
     *
     * Permission Group.AddGroupPermission: Authorized.
     */
    AddGroupPermission: <R = unknown>(payload: Group_AddGroupPermission, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[28]!, payload, call),
    /**
     * Remove a permission from a group (members of the group's tenant with the grant, or system administrators)
     *
     * Permission Group.RemoveGroupPermission: Authorized.
     */
    RemoveGroupPermission: <R = unknown>(payload: Group_RemoveGroupPermission, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[29]!, payload, call),
    /**
     * Remove a group (not system-admin) (members of the group's tenant with the grant, or system administrators)
     *
     * Permission Group.RemoveGroup: Authorized.
     */
    RemoveGroup: <R = unknown>(payload: Group_RemoveGroup, call?: CommandCallOptions): Promise<Result<CommandResponse<R>>> =>
      send<CommandResponse<R>>(options, OPERATIONS[30]!, payload, call),
  },
  },
  queries: {
  Runtime: {
    /**
     * List every registered command with its permission
     *
     * Permission Runtime.ListCommands: Authorized.
     */
    ListCommands: <R = unknown>(payload?: Runtime_ListCommands, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[31]!, payload, call),
    /**
     * List every registered query with its permission
     *
     * Permission Runtime.ListQueries: Authorized.
     */
    ListQueries: <R = unknown>(payload?: Runtime_ListQueries, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[32]!, payload, call),
    /**
     * List every registered domain event
     *
     * Permission Runtime.ListEvents: Authorized.
     */
    ListEvents: <R = unknown>(payload?: Runtime_ListEvents, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[33]!, payload, call),
    /**
     * List command handlers grouped by domain
     *
     * Permission Runtime.ListCommandHandlers: Authorized.
     */
    ListCommandHandlers: <R = unknown>(payload?: Runtime_ListCommandHandlers, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[34]!, payload, call),
    /**
     * List query handlers grouped by domain
     *
     * Permission Runtime.ListQueryHandlers: Authorized.
     */
    ListQueryHandlers: <R = unknown>(payload?: Runtime_ListQueryHandlers, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[35]!, payload, call),
    /**
     * List event handlers and readmodels with their state
     *
     * Permission Runtime.ListEventHandlers: Authorized.
     */
    ListEventHandlers: <R = unknown>(payload?: Runtime_ListEventHandlers, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[36]!, payload, call),
    /**
     * Application name, version, instance, uptime, stores and counts
     *
     * Permission Runtime.GetSystemInfo: Authorized.
     */
    GetSystemInfo: <R = unknown>(payload?: Runtime_GetSystemInfo, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[37]!, payload, call),
    /**
     * List the permission registry (optionally of one domain)
     *
     * Permission Runtime.ListPermissions: Authorized.
     */
    ListPermissions: <R = unknown>(payload?: Runtime_ListPermissions, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[38]!, payload, call),
    /**
     * Metrics of event handlers that are state restorers
     *
     * Permission Runtime.GetMetrics: Authorized.
     */
    GetMetrics: <R = unknown>(payload?: Runtime_GetMetrics, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[39]!, payload, call),
    /**
     * The JSON Schema 2020-12 of a command, query or event type
     *
     * Permission Runtime.GetSchema: Authorized.
     */
    GetSchema: <R = unknown>(payload: Runtime_GetSchema, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[40]!, payload, call),
    /**
     * List the scheduled commands of process managers that have not fired
     *
     * Permission Runtime.ListScheduledCommands: Authorized.
     */
    ListScheduledCommands: <R = unknown>(payload?: Runtime_ListScheduledCommands, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[41]!, payload, call),
    /**
     * List the dead letters of process managers and reactors
     *
     * Permission Runtime.ListDeadLetters: Authorized.
     */
    ListDeadLetters: <R = unknown>(payload?: Runtime_ListDeadLetters, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[42]!, payload, call),
    /**
     * List the latest failures this instance saw: failed commands, handler failures, failed restores
     *
     * Permission Runtime.ListFailures: Authorized.
     */
    ListFailures: <R = unknown>(payload?: Runtime_ListFailures, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[43]!, payload, call),
    /**
     * Subscribe to the real-time system-event stream (SSE; system administrators)
     *
     * Permission Runtime.StreamSystemEvents: administrators (only the authorizer grants it).
     */
    StreamSystemEvents: <R = unknown>(payload?: Runtime_StreamSystemEvents, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[44]!, payload, call),
    /**
     * Subscribe to stored events over HTTP (SSE); each event type's Subscribe permission decides too
     *
     * Permission Runtime.SubscribeEvents: Authenticated.
     */
    SubscribeEvents: <R = unknown>(payload: Runtime_SubscribeEvents, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[45]!, payload, call),
    /**
     * Information about a store (needs <Store>.Info)
     *
     * Permission Runtime.StoreInfo: a custom function decides (Information about a store (needs <Store>.Info)); a denial of a caller without a session is 401.
     */
    StoreInfo: <R = unknown>(payload: Runtime_StoreInfo, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[46]!, payload, call),
    /**
     * Read a page of store entries (needs <Store>.Read)
     *
     * Permission Runtime.StoreRead: a custom function decides (Read a page of store entries (needs <Store>.Read)); a denial of a caller without a session is 401.
     */
    StoreRead: <R = unknown>(payload: Runtime_StoreRead, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[47]!, payload, call),
    /**
     * Subjects whose personal data is stored in clear, not erasable until MigratePersonalData ran (system administrators)
     *
     * Permission Runtime.GetClearPersonalData: administrators (only the authorizer grants it).
     */
    GetClearPersonalData: <R = unknown>(payload?: Runtime_GetClearPersonalData, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[48]!, payload, call),
  },
  Board: {
    /**
     * The open tickets of the sender's tenant, oldest first
     *
     * Permission Board.ListOpenTickets: Authorized.
     */
    ListOpenTickets: <R = Board_ListOpenTickets_Result>(payload?: Board_ListOpenTickets, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[49]!, payload, call),
  },
  Tenant: {
    /**
     * One tenant, with its history on request
     *
     * Permission Tenant.GetTenant: Authorized.
     */
    GetTenant: <R = unknown>(payload: Tenant_GetTenant, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[50]!, payload, call),
    /**
     * A page of tenants (system administrators)
     *
     * Permission Tenant.ListTenants: a custom function decides (A page of tenants (system administrators)); a denial of a caller without a session is 401.
     */
    ListTenants: <R = unknown>(payload?: Tenant_ListTenants, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[51]!, payload, call),
  },
  Account: {
    /**
     * One account, with its history on request (the account itself, or system administrators)
     *
     * Permission Account.GetAccount: a custom function decides (One account, with its history on request (the account itself, or system administrators)); a denial of a caller without a session is 401.
     */
    GetAccount: <R = unknown>(payload: Account_GetAccount, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[52]!, payload, call),
    /**
     * A page of accounts (system administrators)
     *
     * Permission Account.ListAccounts: a custom function decides (A page of accounts (system administrators)); a denial of a caller without a session is 401.
     */
    ListAccounts: <R = unknown>(payload?: Account_ListAccounts, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[53]!, payload, call),
    /**
     * The account of an email (system administrators)
     *
     * Permission Account.GetAccountByEmail: a custom function decides (The account of an email (system administrators)); a denial of a caller without a session is 401.
     */
    GetAccountByEmail: <R = unknown>(payload: Account_GetAccountByEmail, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[54]!, payload, call),
  },
  Identity: {
    /**
     * One identity, with its history on request
     *
     * Permission Identity.GetIdentity: Authorized.
     */
    GetIdentity: <R = unknown>(payload: Identity_GetIdentity, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[55]!, payload, call),
    /**
     * A page of the identities of a tenant (default: the sender's)
     *
     * Permission Identity.ListIdentities: Authorized.
     */
    ListIdentities: <R = unknown>(payload?: Identity_ListIdentities, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[56]!, payload, call),
    /**
     * The identities of an account, to choose one (the account itself, or system administrators)
     *
     * Permission Identity.ListAccountIdentities: a custom function decides (The identities of an account, to choose one (the account itself, or system administrators)); a denial of a caller without a session is 401.
     */
    ListAccountIdentities: <R = unknown>(payload: Identity_ListAccountIdentities, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[57]!, payload, call),
  },
  Group: {
    /**
     * One group, with its history on request
     *
     * Permission Group.GetGroup: Authorized.
     */
    GetGroup: <R = unknown>(payload: Group_GetGroup, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[58]!, payload, call),
    /**
     * A page of the groups of a tenant (default: the sender's)
     *
     * Permission Group.ListGroups: Authorized.
     */
    ListGroups: <R = unknown>(payload?: Group_ListGroups, call?: CallOptions): Promise<Result<R>> =>
      send<R>(options, OPERATIONS[59]!, payload, call),
  },
  },
  };
}

/** The client's type. */
export type Client = ReturnType<typeof createClient>;
