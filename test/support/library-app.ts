/**
 * The `--app` module of test/http/openapi.e2e.test.ts and test/cli/client.e2e.test.ts:
 * a lending library with the built-in domains, on the SQLite file named by
 * LIBRARY_DB or, when it is a postgres:// URL, on the Postgres schema named
 * by LIBRARY_SCHEMA. Its messages cover every kind of permission (authorized,
 * anonymous, a custom function), a payload schema with `$defs`, and an error
 * code of its own; `httpOptions` is what it serves over HTTP with.
 */
import { createFacade, defineDomain, defineErrorCode, type Facade, MnemeError, ProjectionReadmodel, anonymous } from "mneme";
import type { ProjectionList, ProjectionModel } from "mneme";
import { accountRoutes, registerDefaults } from "mneme/defaults";
import type { HttpHandlerOptions } from "mneme/http";
import { createPostgresBackends } from "mneme/postgres";
import { createSqliteBackends } from "mneme/sqlite";

export const ADMIN = { email: "admin@library.test", password: "the librarian's long password" };
export const BOOK_UNAVAILABLE = defineErrorCode("BOOK_UNAVAILABLE", { status: 422, description: "The book is lent already" });

export interface Shelf {
  room: string;
  row?: number;
}
export interface AddBook {
  bookUuid: string;
  title: string;
  shelf?: Shelf;
  tags?: string[];
}
export interface LendBook {
  bookUuid: string;
  borrowerAccountUuid: string;
}
export interface BookState {
  exists: boolean;
  title: string;
  lentTo: string | null;
}

export const Library = defineDomain("Library", { description: "A lending library" });

export const AddBook = Library.command<AddBook>("AddBook", {
  description: "Add a book to the library",
  schema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: {
      bookUuid: { type: "string", format: "uuid" },
      title: { type: "string", minLength: 1, maxLength: 200 },
      shelf: { $ref: "#/$defs/Shelf" },
      tags: { type: "array", items: { type: "string" } },
    },
    required: ["bookUuid", "title"],
    additionalProperties: false,
    $defs: {
      Shelf: {
        type: "object",
        properties: { room: { type: "string", minLength: 1 }, row: { type: "integer", minimum: 1 } },
        required: ["room"],
        additionalProperties: false,
      },
    },
  },
});

/** Only the borrower lends a book to themselves: a custom permission function. */
export const LendBook = Library.command<LendBook>("LendBook", {
  description: "Lend a book to its borrower",
  permission: (reqCtx, envelope) =>
    reqCtx.senderAccountUuid !== undefined && (envelope.payload as LendBook).borrowerAccountUuid === reqCtx.senderAccountUuid
      ? undefined
      : new MnemeError("PERMISSION_DENIED", "only the borrower may lend a book to themselves"),
  schema: {
    type: "object",
    properties: { bookUuid: { type: "string", format: "uuid" }, borrowerAccountUuid: { type: "string", minLength: 1 } },
    required: ["bookUuid", "borrowerAccountUuid"],
    additionalProperties: false,
  },
});

export const GetBook = Library.query<{ bookUuid: string }, ProjectionModel<BookState> | undefined>("GetBook", {
  description: "One book",
  schema: {
    type: "object",
    properties: { bookUuid: { type: "string", format: "uuid" } },
    required: ["bookUuid"],
    additionalProperties: false,
  },
  // What the query answers (null: no such book), for the OpenAPI document and the generated client.
  resultSchema: {
    anyOf: [
      { type: "null" },
      {
        type: "object",
        properties: { aggregateUuid: { type: "string" }, model: { $ref: "#/$defs/BookState" } },
        required: ["aggregateUuid", "model"],
      },
    ],
    $defs: {
      BookState: {
        type: "object",
        properties: { exists: { type: "boolean" }, title: { type: "string" }, lentTo: { type: ["string", "null"] } },
        required: ["exists", "title", "lentTo"],
      },
    },
  },
});

export const ListBooks = Library.query<{ page?: number }, ProjectionList<BookState>>("ListBooks", {
  description: "The books of the tenant (anyone)",
  permission: anonymous,
  schema: { type: "object", properties: { page: { type: "integer", minimum: 1 } }, additionalProperties: false },
});

const BookAdded = Library.event<{ title: string }>("BookAdded");
const BookLent = Library.event<{ borrowerAccountUuid: string }>("BookLent");

const Book = Library.aggregate<BookState>("Book", {
  initialState: () => ({ exists: false, title: "", lentTo: null }),
  evolve: {
    BookAdded: (s, p: { title: string }) => ({ ...s, exists: true, title: p.title }),
    BookLent: (s, p: { borrowerAccountUuid: string }) => ({ ...s, lentTo: p.borrowerAccountUuid }),
  },
});

class Books extends ProjectionReadmodel<BookState> {
  constructor(facade: Facade) {
    super(facade, { aggregate: Book, name: "Books" });
  }
}

/** What the app serves over HTTP with (`mneme openapi` and `mneme client` read it too). */
export const httpOptions: HttpHandlerOptions = { modules: [accountRoutes()] };

export default async function createApp(): Promise<Facade> {
  const db = process.env.LIBRARY_DB;
  if (db === undefined) throw new Error("LIBRARY_DB is not set");
  const backends = db.startsWith("postgres://")
    ? createPostgresBackends({ connectionString: db, schema: process.env.LIBRARY_SCHEMA ?? "public" })
    : createSqliteBackends({ filename: db });
  const facade = createFacade({ appName: "library", version: "2.0.0", ...backends });
  const books = new Books(facade);
  facade.registerDomain(Library, (d) => {
    d.handleCommand(AddBook, async (ctx, _cmd, p) => {
      const book = await ctx.aggregates.load(Book, p.bookUuid);
      if (book.state.exists) throw new MnemeError("CONFLICT", `book ${p.bookUuid} exists already`);
      return [BookAdded.create(p.bookUuid, { title: p.title })];
    });
    d.handleCommand(LendBook, async (ctx, _cmd, p) => {
      const book = await ctx.aggregates.load(Book, p.bookUuid);
      if (!book.state.exists) throw new MnemeError("NOT_FOUND", `book ${p.bookUuid} does not exist`);
      if (book.state.lentTo !== null) throw new MnemeError(BOOK_UNAVAILABLE, `book ${p.bookUuid} is lent already`);
      return [BookLent.create(p.bookUuid, { borrowerAccountUuid: p.borrowerAccountUuid })];
    });
    d.handleQuery(GetBook, (ctx, _q, p) => ctx.readmodel(books).getModel(p.bookUuid));
    d.handleQuery(ListBooks, (ctx, _q, p) => ctx.readmodel(books).getModelList(p.page === undefined ? {} : { page: p.page }));
  });
  facade.registerReadmodel(books);
  await registerDefaults(facade, { admin: ADMIN, passwordHashing: { N: 1024 } });
  return facade;
}
