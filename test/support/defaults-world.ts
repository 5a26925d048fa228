/**
 * Fixture of the defaults-*.test.ts files: a facade with the built-in domains
 * (fast scrypt parameters, a fake clock) and helpers that go through the real
 * commands: register, log in (credentials resolved like mneme/http does), create
 * tenants, identities and groups.
 */
import { type Facade, type FacadeOptions, type RequestContext, createFacade } from "mneme";
import {
  AssignGroup,
  CreateGroup,
  CreateIdentity,
  CreateTenant,
  type DefaultsInfo,
  type DefaultsOptions,
  Login,
  type LoginResult,
  RegisterAccount,
  registerDefaults,
  resolveCredentials,
} from "mneme/defaults";

export const ADMIN_EMAIL = "admin@example.org";
export const ADMIN_PASSWORD = "admin-password-1";
/** Cheap scrypt for tests; the defaults are checked separately. */
export const FAST_HASHING = { N: 1024, r: 8, p: 1 } as const;

/** A clock the test moves by hand (ns). */
export class FakeClock {
  now = 1_700_000_000_000_000_000;
  readonly fn = (): number => this.now;
  advanceMs(ms: number): void {
    this.now += ms * 1e6;
  }
}

export interface Session {
  login: LoginResult;
  reqCtx: RequestContext;
}

export class World {
  constructor(
    readonly facade: Facade,
    readonly ids: DefaultsInfo,
    readonly clock: FakeClock,
    readonly admin: RequestContext,
  ) {}

  /** Registers an account (anonymous) and returns its uuid. */
  async register(email: string, password = `${email}-pw`, name?: string): Promise<string> {
    const r = await this.facade.dispatch(
      RegisterAccount,
      { email, password, ...(name === undefined ? {} : { name }) },
      { waitToFinish: true },
    );
    return r.result!.accountUuid;
  }

  /** Logs in and resolves the credentials (with `identityUuid`, when given) as an HTTP adapter would. */
  async login(email: string, password = `${email}-pw`, identityUuid?: string): Promise<Session> {
    const r = await this.facade.dispatch(Login, { email, password }, { waitToFinish: true });
    const login = r.result!;
    const reqCtx = await resolveCredentials(this.facade, {
      sessionUuid: login.sessionUuid,
      sessionKey: login.sessionKey,
      ...(identityUuid === undefined ? {} : { identityUuid }),
    });
    if (reqCtx === undefined) throw new Error("fresh credentials did not resolve");
    return { login, reqCtx };
  }

  async createTenant(name: string): Promise<string> {
    return (await this.facade.dispatch(CreateTenant, { name }, { reqCtx: this.admin, waitToFinish: true })).result!.tenantUuid;
  }

  async join(accountUuid: string, tenantUuid: string): Promise<string> {
    return (await this.facade.dispatch(CreateIdentity, { accountUuid, tenantUuid }, { reqCtx: this.admin, waitToFinish: true })).result!
      .identityUuid;
  }

  async createGroup(tenantUuid: string, name: string, permissions: string[]): Promise<string> {
    return (await this.facade.dispatch(CreateGroup, { tenantUuid, name, permissions }, { reqCtx: this.admin, waitToFinish: true })).result!
      .groupUuid;
  }

  async assign(identityUuid: string, groupUuid: string): Promise<void> {
    await this.facade.dispatch(AssignGroup, { identityUuid, groupUuid }, { reqCtx: this.admin, waitToFinish: true });
  }

  /** An account that is a member of `tenantUuid` holding `permissions` (no group when empty), logged in as that identity. */
  async member(email: string, tenantUuid: string, permissions: string[]): Promise<Session & { accountUuid: string; identityUuid: string }> {
    const accountUuid = await this.register(email);
    const identityUuid = await this.join(accountUuid, tenantUuid);
    if (permissions.length > 0) await this.assign(identityUuid, await this.createGroup(tenantUuid, `${email} group`, permissions));
    return { ...(await this.login(email, undefined, identityUuid)), accountUuid, identityUuid };
  }
}

/** A started facade with the defaults registered and the admin logged in. */
export async function makeWorld(opts: { facade?: FacadeOptions; defaults?: Partial<DefaultsOptions> } = {}): Promise<World> {
  const clock = new FakeClock();
  const facade = createFacade({ appName: "world", ...opts.facade });
  const ids = await registerDefaults(facade, {
    admin: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD, name: "Ada Admin" },
    passwordHashing: FAST_HASHING,
    clock: clock.fn,
    ...opts.defaults,
  });
  await facade.start();
  const world = new World(facade, ids, clock, {});
  const admin = await world.login(ADMIN_EMAIL, ADMIN_PASSWORD, ids.adminIdentityUuid);
  return new World(facade, ids, clock, admin.reqCtx);
}
