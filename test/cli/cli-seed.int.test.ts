/**
 * `mneme seed --app <module> --file <json>` from a child process on a SQLite
 * file: tenants, groups, accounts (passwords from the file) and identities
 * are created as the HTTP commands would create them; a second run changes
 * nothing; a bad file fails with the JSON pointer of the value at fault and
 * writes nothing, whether the fault is in the file alone or in what it names.
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { Facade } from "mneme";
import { GroupAggregate, IdentityAggregate, Login, TenantProjection } from "mneme/defaults";
import { runProcess } from "../support/run-process.js";
import createApp, { OpenTicket } from "../support/seed-app.js";
import { sqliteScratch } from "../support/sqlite-scratch.js";

const scratch = sqliteScratch("cli-seed");
const root = fileURLToPath(new URL("../..", import.meta.url));

const SEED = {
  tenants: [
    {
      name: "Acme",
      groups: [
        { name: "agents", permissions: ["Helpdesk.OpenTicket"] },
        { name: "leads", permissions: ["Helpdesk.*"] },
      ],
    },
    { name: "Globex", groups: [{ name: "agents", permissions: ["Helpdesk.OpenTicket", "Helpdesk.CloseTicket"] }] },
  ],
  accounts: [
    { email: "Ann@Acme.test", password: "ann's long password", name: "Ann", identities: [{ tenant: "Acme", groups: ["agents", "leads"] }] },
    {
      email: "bob@globex.test",
      password: "bob's long password",
      identities: [{ tenant: "Globex", groups: ["agents"] }, { tenant: "Acme" }],
    },
    { email: "ops@helpdesk.test", password: "ops's long password", identities: [{ tenant: "system", groups: ["system-admin"] }] },
  ],
};

function seed(db: string, file: string) {
  return runProcess("npx", ["tsx", "src/cli/main.ts", "seed", "--app", "test/support/seed-app.ts", "--file", file], root, 90_000, {
    ...process.env,
    SEED_FILE: db,
  });
}

function seedFile(doc: unknown): string {
  const file = `${scratch.newFile()}.json`;
  writeFileSync(file, typeof doc === "string" ? doc : JSON.stringify(doc));
  return file;
}

/** The app on `db`, started in this process (another instance of the one the CLI ran). */
async function open(db: string): Promise<Facade> {
  process.env.SEED_FILE = db;
  const f = scratch.keep(await createApp());
  await f.start();
  return f;
}

describe("mneme seed", () => {
  it("creates tenants, groups, accounts and identities; the second run changes nothing", async () => {
    const db = scratch.newFile();
    const file = seedFile(SEED);
    const first = await seed(db, file);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    const report = JSON.parse(first.stdout) as { changed: boolean; changes: string[] };
    expect(report.changed).toBe(true);
    expect(report.changes).toEqual([
      "tenant Acme created",
      "tenant Globex created",
      "group Acme/agents created",
      "group Acme/leads created",
      "group Globex/agents created",
      "account ann@acme.test registered",
      "identity of ann@acme.test in Acme created",
      "group Acme/agents assigned to ann@acme.test",
      "group Acme/leads assigned to ann@acme.test",
      "account bob@globex.test registered",
      "identity of bob@globex.test in Globex created",
      "group Globex/agents assigned to bob@globex.test",
      "identity of bob@globex.test in Acme created",
      "account ops@helpdesk.test registered",
      "identity of ops@helpdesk.test in system created",
      "group system/system-admin assigned to ops@helpdesk.test",
    ]);

    const f = await open(db);
    const head = f.headPosition;
    await f.stop();
    const second = await seed(db, file);
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toEqual({ changed: false, changes: [] });

    const g = await open(db);
    expect(g.headPosition).toBe(head); // not one event more
    const tenants = await g.readmodel<TenantProjection>("TenantProjection").getModelList();
    expect(tenants.items.map((t) => t.model.name).sort()).toEqual(["Acme", "Globex", "system"]);
    // The passwords are the file's; the identities act with the groups' permissions, and no more.
    const ann = await g.dispatch(Login, { email: "ann@acme.test", password: "ann's long password" });
    const acme = tenants.items.find((t) => t.model.name === "Acme")!.aggregateUuid;
    const identityUuid = ann.result!.identities.find((i) => i.tenantUuid === acme)!.identityUuid;
    const identity = await g.loadAggregate(IdentityAggregate, identityUuid);
    const groups = await Promise.all(identity.state.groupUuids.map((u) => g.loadAggregate(GroupAggregate, u)));
    expect(groups.map((x) => x.state.name).sort()).toEqual(["agents", "leads"]);
    const bob = await g.dispatch(Login, { email: "bob@globex.test", password: "bob's long password" });
    const bobAcme = bob.result!.identities.find((i) => i.tenantUuid === acme)!;
    const asBobInAcme = { senderAccountUuid: bob.result!.accountUuid, senderIdentityUuid: bobAcme.identityUuid, senderTenantUuid: acme };
    await expect(g.dispatch(OpenTicket, { title: "x" }, { reqCtx: asBobInAcme })).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
    await g.stop();
  }, 240_000);

  it("a bad file fails with the JSON pointer of the value at fault and writes nothing", async () => {
    const db = scratch.newFile();
    expect((await seed(db, seedFile({ tenants: [{ name: "Acme" }] }))).code).toBe(0);
    const f = await open(db);
    const head = f.headPosition;
    await f.stop();

    const cases: [unknown, string][] = [
      ["{ not json", "the seed file"],
      [{ tenants: [{ name: "Initech" }], acounts: [] }, "the seed file at /acounts: is not a known field"],
      [
        {
          accounts: [
            { email: "ann@acme.test", password: "long enough pw" },
            { email: "no email", password: "long enough pw" },
          ],
        },
        "/accounts/1/email",
      ],
      [{ accounts: [{ email: "ann@acme.test", password: "short" }] }, "the seed file at /accounts/0/password: must have"],
      [{ tenants: [{ name: "Acme", groups: [{ name: "a", permissions: ["Helpdesk.Nope"] }] }] }, "/tenants/0/groups/0/permissions/0"],
      // Valid alone, but naming what is nowhere: refused before the first write (Initech is not created).
      [
        {
          tenants: [{ name: "Initech" }],
          accounts: [{ email: "ann@acme.test", password: "long enough pw", identities: [{ tenant: "Acme", groups: ["agents"] }] }],
        },
        'the seed file at /accounts/0/identities/0/groups/0: tenant Acme has no group named "agents"',
      ],
      [
        { accounts: [{ email: "ann@acme.test", password: "long enough pw", identities: [{ tenant: "Umbrella" }] }] },
        "/accounts/0/identities/0/tenant",
      ],
    ];
    for (const [doc, expected] of cases) {
      const r = await seed(db, seedFile(doc));
      expect(r.code, JSON.stringify(doc)).toBe(1);
      expect(r.stderr).toContain(expected);
      expect(r.stderr).not.toContain("    at "); // a message, not a stack trace
    }
    const g = await open(db);
    expect(g.headPosition).toBe(head);
    await g.stop();
    const usage = await runProcess("npx", ["tsx", "src/cli/main.ts", "seed", "--app", "test/support/seed-app.ts"], root);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("missing --file");
  }, 240_000);
});
