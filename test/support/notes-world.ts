/**
 * The world of the subscription and live-query e2e tests: a Notes domain
 * (a note has an author, personal data of the person it names), a projection
 * of notes, live queries over it, and a test-only resolver and authorizer
 * with users in two tenants whose sessions can be revoked.
 */
import {
  type Authorizer,
  type Facade,
  type FacadeOptions,
  MnemeError,
  ProjectionReadmodel,
  type RequestContext,
  createFacade,
  defineDomain,
} from "mneme";
import { type CredentialResolver, allowEventSubscriptions } from "mneme/http";
import { SseStream } from "./sse-stream.js";

export const TENANT_SYS = "0190f5e4-0000-7000-8000-00000000e000";
export const TENANT_A = "0190f5e4-0000-7000-8000-00000000e001";
export const TENANT_B = "0190f5e4-0000-7000-8000-00000000e002";

export interface NoteState {
  exists: boolean;
  text: string;
  author: string;
}

export const Notes = defineDomain("Notes");
export const AddNote = Notes.command<{ noteUuid: string; text: string; author: string; personUuid: string }>("AddNote", {
  personalData: { subject: (p) => p.personUuid, fields: ["author"] },
});
export const FlagNote = Notes.command<{ noteUuid: string }>("FlagNote");
export const NoteAdded = Notes.event<{ text: string; author: string; personUuid: string }>("NoteAdded", {
  personalData: { subject: (p) => p.personUuid, fields: ["author"] },
});
/** Subscribable by the administrator only (a custom permission). */
export const NoteFlagged = Notes.event<{ flagged: true }>("NoteFlagged");
/** Never made subscribable. */
export const NoteArchived = Notes.event<{ archived: true }>("NoteArchived");
export const NoteAggregate = Notes.aggregate<NoteState>("Note", {
  initialState: () => ({ exists: false, text: "", author: "" }),
  evolve: {
    NoteAdded: (s, p: { text: string; author: string }) => ({ ...s, exists: true, text: p.text, author: p.author }),
    NoteFlagged: (s) => s,
    NoteArchived: (s) => s,
  },
});
/** How many notes the tenant has: shared by every subscriber of the tenant. */
export const CountNotes = Notes.query<Record<string, never>, { count: number }>("CountNotes", {
  live: { share: "tenant", readmodels: ["NoteProjection"] },
});
/** The tenant's note texts with their tenant (shared per sender, the default). */
export const ListNotes = Notes.query<{ prefix?: string }, { tenantUuid: string; texts: string[] }>("ListNotes", { live: true });
/** Not live. */
export const GetNoteCount = Notes.query<Record<string, never>, number>("GetNoteCount");

export class NoteProjection extends ProjectionReadmodel<NoteState> {
  constructor(facade: Facade) {
    super(facade, { aggregate: NoteAggregate, name: "NoteProjection" });
  }
}

/** Counts the runs of the live queries' handlers (to see that subscribers share them). */
export const queryRuns = { count: 0, list: 0 };

export function registerNotes(facade: Facade): NoteProjection {
  const notes = new NoteProjection(facade);
  facade.registerDomain(Notes, (d) => {
    d.handleCommand(AddNote, async (ctx, _c, p) => {
      const note = await ctx.aggregates.load(NoteAggregate, p.noteUuid);
      if (note.state.exists) throw new MnemeError("CONFLICT", "note exists");
      return [NoteAdded.create(p.noteUuid, { text: p.text, author: p.author, personUuid: p.personUuid })];
    });
    d.handleCommand(FlagNote, () => []);
    d.handleQuery(CountNotes, async (ctx) => {
      queryRuns.count++;
      return { count: (await ctx.readmodel(notes).getModelList({ pageSize: 1 })).total };
    });
    d.handleQuery(ListNotes, async (ctx, _q, p) => {
      queryRuns.list++;
      const list = await ctx.readmodel(notes).getModelList({ pageSize: 1000 });
      const texts = list.items.map((i) => (i.model as NoteState).text).filter((t) => t.startsWith(p.prefix ?? ""));
      return { tenantUuid: ctx.tenantUuid, texts: texts.sort() };
    });
    d.handleQuery(GetNoteCount, async (ctx) => (await ctx.readmodel(notes).getModelList({ pageSize: 1 })).total);
  });
  facade.registerReadmodel(notes);
  allowEventSubscriptions(facade, [NoteAdded]);
  allowEventSubscriptions(facade, [NoteFlagged], {
    permission: (reqCtx) =>
      reqCtx.senderAccountUuid === ADMIN.reqCtx.senderAccountUuid ? undefined : new MnemeError("PERMISSION_DENIED", "administrators only"),
  });
  return notes;
}

export interface NotesUser {
  readonly name: string;
  readonly token: string;
  readonly reqCtx: RequestContext;
  readonly headers: Record<string, string>;
}

let userNo = 0;
const sessions = new Map<string, NotesUser>();

/** A user of `tenant` with a live session (revoke() ends it). */
export function newUser(name: string, tenant: string): NotesUser {
  const n = String(++userNo).padStart(4, "0");
  const sessionUuid = `0190f5e4-0000-7000-8000-00000001${n}`;
  const reqCtx: RequestContext = {
    senderAccountUuid: `0190f5e4-0000-7000-8000-00000002${n}`,
    senderSessionUuid: sessionUuid,
    senderIdentityUuid: `0190f5e4-0000-7000-8000-00000003${n}`,
    senderTenantUuid: tenant,
  };
  const token = `${sessionUuid}.${name}-key`;
  const u = { name, token, reqCtx, headers: { authorization: `Bearer ${token}`, "x-identity-uuid": reqCtx.senderIdentityUuid! } };
  sessions.set(token, u);
  return u;
}

/** Signs the user out: its credentials no longer resolve. */
export function revoke(u: NotesUser): void {
  sessions.delete(u.token);
}

export const ADMIN = newUser("admin", TENANT_SYS);

export const notesResolver: CredentialResolver = async (_facade, creds) => {
  const u = sessions.get(`${creds.sessionUuid}.${creds.sessionKey}`);
  if (u === undefined || creds.identityUuid !== u.reqCtx.senderIdentityUuid) return undefined;
  return { ...u.reqCtx };
};

/** The administrator may everything (every tenant); others an Authorized permission in their own tenant only. */
export const notesAuthorizer: Authorizer = (reqCtx, permission) => {
  if (reqCtx.senderAccountUuid === ADMIN.reqCtx.senderAccountUuid) return undefined;
  if (permission.level !== "Authorized")
    return new MnemeError("PERMISSION_DENIED", `${permission.domain}.${permission.type} is for administrators`);
  if (reqCtx.targetTenantUuid !== undefined && reqCtx.targetTenantUuid !== reqCtx.senderTenantUuid)
    return new MnemeError("PERMISSION_DENIED", `not in tenant ${reqCtx.targetTenantUuid}`);
  return undefined;
};

export async function startNotes(opts: FacadeOptions = {}): Promise<Facade> {
  const facade = createFacade({ appName: "notes", authorizer: notesAuthorizer, ...opts });
  registerNotes(facade);
  await facade.start();
  return facade;
}

/** One SSE block as a client sees it. */
export interface StreamBlock {
  readonly event: string | undefined;
  readonly id: number | undefined;
  readonly data: any;
}

/** A minimal SSE client over fetch: every block with its event, id and parsed data. */
export class StreamClient extends SseStream {
  readonly blocks: StreamBlock[] = [];
  lastEventId: number | undefined;

  private constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super();
  }

  static async open(url: string, headers: Record<string, string>): Promise<StreamClient> {
    const { res, abort } = await SseStream.fetchStream(url, headers);
    if (res.status !== 200) {
      const c = new StreamClient(res.status, await res.text());
      c.ended = true;
      return c;
    }
    const c = new StreamClient(200, "");
    c.readBody(res.body!, abort);
    return c;
  }

  /** Data blocks without an `event:` field (events, results). */
  get messages(): StreamBlock[] {
    return this.blocks.filter((b) => b.event === undefined && b.data !== undefined);
  }

  override until(predicate: (c: this) => boolean, ms = 20_000): Promise<void> {
    return super.until(predicate, ms);
  }

  protected describe(): string {
    return `${this.blocks.length} blocks, last ${JSON.stringify(this.blocks.at(-1))}`;
  }

  protected onBlock(block: string): void {
    let id: number | undefined;
    let data: string | undefined;
    let event: string | undefined;
    let any = false;
    for (const line of block.split("\n")) {
      if (line.startsWith(":") || line.startsWith("retry: ")) continue;
      any = true;
      if (line.startsWith("id: ")) id = Number(line.slice(4));
      else if (line.startsWith("data: ")) data = line.slice(6);
      else if (line.startsWith("event: ")) event = line.slice(7);
    }
    if (!any) return;
    if (id !== undefined) this.lastEventId = id;
    this.blocks.push({ event, id, data: data === undefined ? undefined : JSON.parse(data) });
  }
}
