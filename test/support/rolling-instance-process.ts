/**
 * One instance of an app, run by the release whose source is at `<root>/src`
 * (this repository, or an earlier release taken from git history by
 * test/store-rolling.int.test.ts), on the Postgres schema `<schema>`. It uses
 * only what every release since 0.1.0 exports (defineDomain, createFacade,
 * ProjectionReadmodel, createPostgresBackends), so the same app runs on each.
 *
 * Args: root schema tag personal(0|1). Lines in on stdin: `add <n>` dispatches
 * n notes (4 at a time) and prints `{"added":[...]}` with each note's outcome;
 * `stop` stops the facade and exits. Prints `{"started":true}` once started,
 * or `{"startError":...}`.
 */
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const [root, schema, tag, personal] = process.argv.slice(2) as [string, string, string, string];
type Any = any; // the API of whichever release runs
const mneme: Any = await import(pathToFileURL(`${root}/src/index.ts`).href);
const postgres: Any = await import(pathToFileURL(`${root}/src/postgres/index.ts`).href);

const Notes: Any = mneme.defineDomain("Notes");
const AddNote: Any = Notes.command("AddNote");
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
});
const facade: Any = mneme.createFacade({ appName: "rolling", ...backends });
facade.registerDomain(Notes);
facade.registerReadmodel(new NoteProjection(facade));
const reqCtx = { senderAccountUuid: "acc", senderSessionUuid: "ses", senderIdentityUuid: "idn", senderTenantUuid: "tenant-1" };
const say = (o: unknown): void => void process.stdout.write(`${JSON.stringify(o)}\n`);

try {
  await facade.start();
  say({ started: true });
} catch (e) {
  say({ startError: String((e as Error)?.message ?? e), code: (e as { code?: string }).code });
  process.exit(0);
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
  } else if (cmd === "stop") {
    await facade.stop().catch(() => undefined);
    await backends.close().catch(() => undefined);
    say({ stopped: true });
    process.exit(0);
  }
}
