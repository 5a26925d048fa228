/**
 * Seeding the built-in domains (`mneme seed --app <module> --file <json>`):
 * tenants, their groups, accounts and their identities, dispatched as the
 * commands an administrator would send over HTTP (same permissions, same
 * events), as a system administrator of the app. Idempotent: what exists is
 * found (tenants by uuid or name, groups by name in their tenant, accounts by
 * email, identities by account and tenant) and left as it is; only what is
 * missing is created or added. Every reference is resolved before the first
 * write, so a file that names something unknown changes nothing.
 */
import type { Facade } from "../app/facade.js";
import { isMnemeError, MnemeError } from "../model/errors.js";
import { newUuid } from "../model/clock.js";
import type { RequestContext } from "../model/types.js";
import type { ProjectionList, ProjectionReadmodel } from "../readmodel/projection-readmodel.js";
import { GetAccountByEmail, RegisterAccount } from "./account.js";
import { AddGroupPermission, checkPermissionName, CreateGroup } from "./group.js";
import type { GroupModel } from "./group-domain.js";
import { AssignGroup, CreateIdentity } from "./identity.js";
import { IdentityAggregate, type IdentityModel } from "./identity-domain.js";
import { identityUuidOf } from "./ids.js";
import { READMODELS, requireDefaults } from "./readmodel-names.js";
import { type SeedDocument, seedError } from "./seed-file.js";
import { systemIdsOf } from "./sender.js";
import { CreateTenant, TenantAggregate } from "./tenant.js";
import type { TenantModel } from "./tenant-domain.js";

export { parseSeedDocument, type SeedDocument } from "./seed-file.js";

/** What a seed did: one line per thing created or added; `changed` is false when everything was there. */
export interface SeedReport {
  readonly changed: boolean;
  readonly changes: readonly string[];
}

/** A tenant of the plan: its uuid (new ones get theirs now) and its groups by name. */
interface PlannedTenant {
  readonly name: string;
  readonly tenantUuid: string;
  readonly exists: boolean;
  readonly groups: Map<string, { groupUuid: string; permissions: readonly string[] } | undefined>;
}

/**
 * Seeds a started facade with registerDefaults installed from a checked seed file.
 * @throws MnemeError VALIDATION_FAILED (with the pointer) when the file names a tenant or group that is nowhere.
 */
export async function seedDefaults(facade: Facade, doc: SeedDocument, opts: { readonly waitMs?: number } = {}): Promise<SeedReport> {
  requireDefaults(facade);
  await untilBuiltInReadmodelsCaughtUp(facade, opts.waitMs ?? 30_000);
  const reqCtx = await systemAdministratorContext(facade);
  const tenants = await planTenants(facade, doc);
  const plannedGroups = await planGroups(facade, doc, tenants);
  checkIdentityReferences(doc, tenants);
  for (const t of doc.tenants)
    for (const g of t.groups)
      g.permissions.forEach((p, i) => atPointer(`${g.pointer}/permissions/${i}`, () => checkPermissionName(facade, p)));

  const changes: string[] = [];
  const send = async <P, R>(type: Parameters<Facade["dispatch"]>[0], payload: P, change: string): Promise<R> => {
    const r = await facade.dispatch<P, R>(type, payload as never, { reqCtx, waitToFinish: true });
    changes.push(change);
    return r.result as R;
  };
  for (const t of tenants.values()) {
    if (!t.exists) await send(CreateTenant, { tenantUuid: t.tenantUuid, name: t.name }, `tenant ${t.name} created`);
  }
  for (const { tenant, group } of plannedGroups) {
    const t = tenants.get(tenant)!;
    const found = t.groups.get(group.name);
    if (found === undefined) {
      const groupUuid = newUuid();
      await send(
        CreateGroup,
        { groupUuid, tenantUuid: t.tenantUuid, name: group.name, permissions: [...group.permissions] },
        `group ${t.name}/${group.name} created`,
      );
      t.groups.set(group.name, { groupUuid, permissions: group.permissions });
      continue;
    }
    for (const permission of group.permissions.filter((p) => !found.permissions.includes(p)))
      await send(
        AddGroupPermission,
        { groupUuid: found.groupUuid, permission },
        `permission ${permission} added to group ${t.name}/${group.name}`,
      );
  }
  for (const a of doc.accounts) {
    let accountUuid = await accountOf(facade, reqCtx, a.email);
    if (accountUuid === undefined) {
      const r = await send<unknown, { accountUuid: string }>(
        RegisterAccount,
        { email: a.email, password: a.password, name: a.name },
        `account ${a.email} registered`,
      );
      accountUuid = r.accountUuid;
    }
    for (const i of a.identities) {
      const t = tenants.get(i.tenant)!;
      const identityUuid = identityUuidOf(t.tenantUuid, accountUuid);
      let identity = await facade.loadAggregate(IdentityAggregate, identityUuid);
      if (identity.version === 0 || identity.state.removed) {
        await send(CreateIdentity, { accountUuid, tenantUuid: t.tenantUuid }, `identity of ${a.email} in ${t.name} created`);
        identity = await facade.loadAggregate(IdentityAggregate, identityUuid);
      }
      for (const g of i.groups) {
        const groupUuid = t.groups.get(g)!.groupUuid;
        if (!identity.state.groupUuids.includes(groupUuid))
          await send(AssignGroup, { identityUuid, groupUuid }, `group ${t.name}/${g} assigned to ${a.email}`);
      }
    }
  }
  return { changed: changes.length > 0, changes };
}

/** Rethrows a check's error at a pointer of the seed file. */
function atPointer(pointer: string, check: () => void): void {
  try {
    check();
  } catch (e) {
    if (isMnemeError(e)) throw seedError(pointer, e.message);
    throw e;
  }
}

function projection<M>(facade: Facade, name: string): ProjectionReadmodel<M, M> {
  return facade.readmodel<ProjectionReadmodel<M, M>>(name);
}

/** Every page of a projection's list (trusted read). */
async function all<M>(read: (page: number) => Promise<ProjectionList<M>>): Promise<ProjectionList<M>["items"]> {
  const out: ProjectionList<M>["items"] = [];
  for (let page = 1; ; page++) {
    const list = await read(page);
    out.push(...list.items);
    if (list.items.length < list.pageSize || out.length >= list.total) return out;
  }
}

/**
 * Waits until the built-in readmodels this instance runs have applied every
 * event stored before it started: the seed decides what exists from them.
 */
async function untilBuiltInReadmodelsCaughtUp(facade: Facade, waitMs: number): Promise<void> {
  const head = facade.headPosition;
  const names = new Set<string>(Object.values(READMODELS));
  const deadline = Date.now() + waitMs;
  for (;;) {
    const behind = [...facade.eventHandlers.values()].filter((h) => names.has(h.name) && h.state === "running" && h.lastPosition < head);
    if (behind.length === 0) return;
    if (Date.now() > deadline)
      throw new MnemeError(
        "UNAVAILABLE",
        `seed: the readmodels ${behind.map((h) => h.name).join(", ")} did not catch up within ${waitMs} ms`,
      );
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The request context of a live member of the system tenant's system-admin group (the bootstrapped one comes first). */
async function systemAdministratorContext(facade: Facade): Promise<RequestContext> {
  const { systemTenantUuid, systemAdminGroupUuid } = systemIdsOf(facade);
  const identities = await all((page) =>
    projection<IdentityModel>(facade, READMODELS.identity).getModelList({ tenantUuid: systemTenantUuid, page, pageSize: 1000 }),
  );
  const admin = identities.find((i) => !i.model.removed && i.model.groupUuids.includes(systemAdminGroupUuid));
  if (admin === undefined)
    throw new MnemeError("INVALID_STATE", "seed: the app has no system administrator (has it started once with registerDefaults?)");
  // The process is trusted as the bootstrap is (it runs the app's own module): no session is opened, the run gets
  // a session uuid of its own so the command records tell its commands apart, and says it is a seed.
  return {
    senderAccountUuid: admin.model.accountUuid,
    senderIdentityUuid: admin.aggregateUuid,
    senderTenantUuid: systemTenantUuid,
    senderSessionUuid: newUuid(),
    attributes: { seed: true },
  };
}

/** The tenants of the file and those the identities name, by name: found in the store, or to be created. */
async function planTenants(facade: Facade, doc: SeedDocument): Promise<Map<string, PlannedTenant>> {
  const stored = (await all((page) => projection<TenantModel>(facade, READMODELS.tenant).getModelList({ page, pageSize: 1000 }))).filter(
    (t) => !t.model.removed,
  );
  const byName = (name: string) => stored.filter((t) => t.model.name === name);
  const out = new Map<string, PlannedTenant>();
  const add = (name: string, tenantUuid: string, exists: boolean) => out.set(name, { name, tenantUuid, exists, groups: new Map() });
  for (const t of doc.tenants) {
    if (t.tenantUuid !== undefined) {
      const agg = await facade.loadAggregate(TenantAggregate, t.tenantUuid);
      if (agg.version > 0 && agg.state.removed) throw seedError(`${t.pointer}/tenantUuid`, `tenant ${t.tenantUuid} was removed`);
      add(t.name, t.tenantUuid, agg.version > 0);
      continue;
    }
    const found = byName(t.name);
    if (found.length > 1)
      throw seedError(`${t.pointer}/name`, `${found.length} tenants are named ${JSON.stringify(t.name)}: give its tenantUuid`);
    add(t.name, found[0]?.aggregateUuid ?? newUuid(), found.length === 1);
  }
  // Identities may name a tenant the file does not list (the system tenant, one made over HTTP).
  for (const a of doc.accounts)
    for (const i of a.identities) {
      if (out.has(i.tenant)) continue;
      const found = byName(i.tenant);
      if (found.length === 1) add(i.tenant, found[0]!.aggregateUuid, true);
      else if (found.length > 1) throw seedError(`${i.pointer}/tenant`, `${found.length} tenants are named ${JSON.stringify(i.tenant)}`);
    }
  return out;
}

/** The groups stored in the planned tenants that exist (by name), and the file's groups to create or complete. */
async function planGroups(facade: Facade, doc: SeedDocument, tenants: Map<string, PlannedTenant>) {
  for (const t of tenants.values()) {
    if (!t.exists) continue;
    const groups = await all((page) =>
      projection<GroupModel>(facade, READMODELS.group).getModelList({ tenantUuid: t.tenantUuid, page, pageSize: 1000 }),
    );
    for (const g of groups) {
      if (g.model.removed) continue;
      if (t.groups.has(g.model.name))
        t.groups.set(g.model.name, undefined); // two groups of one name: ambiguous
      else t.groups.set(g.model.name, { groupUuid: g.aggregateUuid, permissions: g.model.permissions });
    }
  }
  const planned = [];
  for (const t of doc.tenants)
    for (const group of t.groups) {
      if (tenants.get(t.name)!.groups.has(group.name) && tenants.get(t.name)!.groups.get(group.name) === undefined)
        throw seedError(`${group.pointer}/name`, `tenant ${t.name} has several groups named ${JSON.stringify(group.name)}`);
      planned.push({ tenant: t.name, group });
    }
  return planned;
}

/** Every identity names a tenant of the plan and groups of that tenant (stored, or in the file). */
function checkIdentityReferences(doc: SeedDocument, tenants: Map<string, PlannedTenant>): void {
  for (const a of doc.accounts)
    for (const i of a.identities) {
      const t = tenants.get(i.tenant);
      if (t === undefined)
        throw seedError(`${i.pointer}/tenant`, `no tenant named ${JSON.stringify(i.tenant)} is in the file or the store`);
      const inFile = doc.tenants.find((x) => x.name === i.tenant)?.groups.map((g) => g.name) ?? [];
      i.groups.forEach((g, n) => {
        const stored = t.groups.get(g);
        if (t.groups.has(g) && stored === undefined)
          throw seedError(`${i.pointer}/groups/${n}`, `tenant ${i.tenant} has several groups named ${JSON.stringify(g)}`);
        if (stored === undefined && !inFile.includes(g))
          throw seedError(
            `${i.pointer}/groups/${n}`,
            `tenant ${i.tenant} has no group named ${JSON.stringify(g)} in the file or the store`,
          );
      });
    }
}

/** The account of an email, or undefined. */
async function accountOf(facade: Facade, reqCtx: RequestContext, email: string): Promise<string | undefined> {
  try {
    return (await facade.query(GetAccountByEmail, { email }, { reqCtx })).aggregateUuid;
  } catch (e) {
    if (isMnemeError(e, "NOT_FOUND")) return undefined;
    throw e;
  }
}
