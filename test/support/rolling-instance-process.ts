/**
 * One instance of an app, run by the release whose source is at `<root>/src`
 * (this repository, or an earlier release taken from git history by
 * test/store/store-rolling.int.test.ts), on the Postgres schema `<schema>`. It uses
 * only what every release since 0.1.0 exports (defineDomain, createFacade,
 * ProjectionReadmodel, createPostgresBackends), so the same app runs on each.
 *
 * Args: root schema tag personal(0|1) [mode]. Lines in on stdin: `add <n>`
 * dispatches n notes (4 at a time) and prints `{"added":[...]}` with each
 * note's outcome; `loop` dispatches notes one after the other until the
 * process ends, printing `{"ack":uuid}` for each acknowledged one;
 * `stop` stops the facade and exits. Prints `{"started":true}` once started,
 * or `{"startError":...}`.
 *
 * Mode `accounts` adds the built-in domains (registerDefaults, from
 * `src/defaults/index.ts`, which every release has) and the lines
 * `register <email>`, `login <email>`, `get <accountUuid> <sessionUuid>`
 * (GetAccount as the account itself), `forget <subject>`, `finish` (this
 * release: facade.finishRollingUpgrade) and `info` (this release: rollingFrom);
 * mode `accounts-rolling` also passes `rollingFrom: "0.1.0"` to the backends
 * (releases before it ignore the option).
 */
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const [root, schema, tag, personal, mode = ""] = process.argv.slice(2) as [string, string, string, string, string?];
const accounts = mode.startsWith("accounts");
type Any = any; // the API of whichever release runs
const PASSWORD = "correct horse battery staple";
const mneme: Any = await import(pathToFileURL(`${root}/src/index.ts`).href);
const postgres: Any = await import(pathToFileURL(`${root}/src/postgres/index.ts`).href);

const Notes: Any = mneme.defineDomain("Notes");
// With the built-in authorizer (accounts mode) the made-up sender below holds no identity: anyone may add notes.
const AddNote: Any = Notes.command("AddNote", accounts ? { permission: mneme.anonymous } : {});
const NoteAdded: Any = Notes.event(
  "NoteAdded",
  personal === "1" ? { personalData: { subject: (p: { owner: string }) => p.owner, fields: ["text"] } } : {},
);
const Note: Any = Notes.aggregate("Note", {
  initialState: () => ({ exists: false, owner: "", text: "" }),
  evolve: { NoteAdded: (_s: unknown, p: { owner: string; text: string }) => ({ exists: true, owner: p.owner, text: p.text }) },
});
Notes.handleCommand(AddNote, async (ctx: Any, _cmd: unknown, p: { noteUuid: string; owner: string; text: string }) => {
  const note = await ctx.aggregates.load(Note, p.noteUuid);
  if (note.state.exists) throw new mneme.MnemeError("CONFLICT", `note ${p.noteUuid} exists`);
  return [NoteAdded.create(p.noteUuid, { owner: p.owner, text: p.text })];
});
class NoteProjection extends mneme.ProjectionReadmodel {
  constructor(facade: unknown) {
    super(facade, { aggregate: Note, name: "NoteProjection" });
  }
}

const backends: Any = postgres.createPostgresBackends({
  connectionString: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  schema,
  pollIntervalMs: 100,
  ...(mode === "accounts-rolling" ? { rollingFrom: "0.1.0" } : {}),
});
const facade: Any = mneme.createFacade({ appName: "rolling", ...backends });
facade.registerDomain(Notes);
facade.registerReadmodel(new NoteProjection(facade));
const defaults: Any = accounts ? await import(pathToFileURL(`${root}/src/defaults/index.ts`).href) : undefined;
if (accounts) {
  await defaults.registerDefaults(facade, {
    admin: { email: "admin@rolling.test", password: PASSWORD },
    passwordHashing: { N: 1024, r: 8, p: 1 },
  });
}
const reqCtx = { senderAccountUuid: "acc", senderSessionUuid: "ses", senderIdentityUuid: "idn", senderTenantUuid: "tenant-1" };
const say = (o: unknown): void => void process.stdout.write(`${JSON.stringify(o)}\n`);

try {
  await facade.start();
  say({ started: true });
} catch (e) {
  say({ startError: String((e as Error)?.message ?? e), code: (e as { code?: string }).code });
  process.exit(0);
}

/** Runs one line of the accounts mode; the answer is printed as one JSON line. */
async function accountLine(cmd: string, a: string | undefined, b: string | undefined): Promise<unknown> {
  const anonymous = {};
  switch (cmd) {
    case "register":
      return (
        await facade.dispatch(defaults.RegisterAccount, { email: a, password: PASSWORD, name: `name of ${a}` }, { reqCtx: anonymous })
      ).result;
    case "login":
      return (await facade.dispatch(defaults.Login, { email: a, password: PASSWORD }, { reqCtx: anonymous })).result;
    case "get":
      return facade.query(
        defaults.GetAccount,
        { accountUuid: a, includeHistory: true },
        { reqCtx: { senderAccountUuid: a, senderSessionUuid: b } },
      );
    case "forget":
      return facade.forget(a);
    case "finish":
      return facade.finishRollingUpgrade({ settleMs: 0 });
    case "info":
      return { rollingFrom: facade.rollingFrom ?? null, storeFormat: facade.runtime.systemInfo().storeFormat };
    default:
      throw new Error(`unknown line ${cmd}`);
  }
}

let serial = 0;
async function addNote(): Promise<unknown> {
  const noteUuid = mneme.newUuid();
  const text = `${tag} note ${++serial}`;
  try {
    await facade.dispatch(AddNote, { noteUuid, owner: `owner-${tag}-${serial}`, text }, { reqCtx });
    return { noteUuid, text, ok: true };
  } catch (e) {
    return { noteUuid, text, ok: false, code: (e as { code?: string }).code, message: String((e as Error)?.message ?? e) };
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  const [cmd, arg] = line.trim().split(" ");
  if (cmd === "add") {
    const added: unknown[] = [];
    const n = Number(arg);
    for (let i = 0; i < n; i += 4) added.push(...(await Promise.all(Array.from({ length: Math.min(4, n - i) }, addNote))));
    say({ added });
  } else if (cmd === "loop") {
    void (async () => {
      for (;;) {
        const o = (await addNote()) as { ok: boolean; noteUuid: string };
        if (o.ok) say({ ack: o.noteUuid });
      }
    })();
  } else if (accounts && cmd !== "stop" && cmd !== undefined) {
    const [, a, b] = line.trim().split(" ");
    try {
      say({ answer: (await accountLine(cmd, a, b)) ?? null });
    } catch (e) {
      say({ error: String((e as Error)?.message ?? e), code: (e as { code?: string }).code ?? null });
    }
  } else if (cmd === "stop") {
    await facade.stop().catch(() => undefined);
    await backends.close().catch(() => undefined);
    say({ stopped: true });
    process.exit(0);
  }
}
