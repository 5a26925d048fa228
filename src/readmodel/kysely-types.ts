/**
 * The kysely types mneme's public typings name (SqlTableReadmodel's `kysely`
 * getter), in one place. kysely is an optional peer dependency: an app that
 * does not install it must still type-check against `mneme`, so the import is
 * marked to be ignored when the package is absent; the names are then `any`,
 * and only an app that uses them needs kysely installed.
 */
// eslint-disable-next-line @typescript-eslint/ban-ts-comment -- @ts-expect-error would fail where kysely IS installed
/** @ts-ignore -- kysely is an optional peer dependency (see above); a doc comment, so the declaration keeps it */
export type { Kysely, KyselyPlugin, OperationNode, QueryCreator, QueryResult, RootOperationNode, TableNode, UnknownRow } from "kysely";

// eslint-disable-next-line @typescript-eslint/ban-ts-comment -- as above
/** @ts-ignore -- kysely is an optional peer dependency (see above); KyselyModule: the kysely module, as imported on demand */
export type KyselyModule = typeof import("kysely");
