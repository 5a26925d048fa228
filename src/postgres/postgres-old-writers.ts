import { LOWEST_WRITER_FORMAT, releaseOfFormat, STORE_FORMAT, STORE_RELEASE } from "../store/store-format.js";

/**
 * The database's refusal of writers of earlier releases that would misread
 * what this release writes (see docs/upgrading.md, Rolling deploys). Their
 * code cannot change, so the schema refuses them by what their statements
 * leave out:
 *
 * - mneme 0.1.0 (format 1) knows no event versions: its own append function
 *   (which its `init()` puts back) inserts events without `event_version`.
 *   That column's default is 0, which no release of format 2 or later writes,
 *   and a trigger refuses such a row. Its 0.1 signature of `mneme_append`, kept
 *   so that its calls get an answer rather than "function does not exist",
 *   refuses likewise. (0.1 reads encrypted personal fields as values: it would
 *   fold ciphertext into readmodels, and register an e-mail address twice.)
 * - mneme 0.1.0 and 0.2.0-pre (formats 1 and 2) write readmodel documents without
 *   their tenant: a tenant-scoped read of this release would not find them.
 *   That column's default is a marker no release of format 3 writes, and a
 *   trigger refuses a document carrying it, so an old instance holding a
 *   readmodel's lock stops (its batch fails, its checkpoint stays) instead of
 *   writing documents this release cannot serve; an instance of this release
 *   takes the readmodel over once the old one has stopped.
 *
 * SQLSTATE of the refusals: {@link SQLSTATE_OLD_WRITER}.
 */
export const SQLSTATE_OLD_WRITER = "MN001";

/** The tenant default that marks a document written by a release that does not store tenants (0.1.0, 0.2.0-pre). */
const UNSCOPED_WRITER = "mneme:written-without-tenant";

/** The text of a refusal, naming the store's format, the old writer's release, and what to do. */
export function oldWriterMessage(schema: string, writerFormat: number, what: string): string {
  const earlier = writerFormat > 1 ? " or earlier" : "";
  return (
    `mneme: schema ${schema} is in store format ${STORE_FORMAT} (mneme ${STORE_RELEASE}); ` +
    `${what} comes from mneme ${releaseOfFormat(writerFormat)}${earlier} (format ${writerFormat}${earlier}), which would misread it ` +
    `(this format admits writers of format ${LOWEST_WRITER_FORMAT}, mneme ${releaseOfFormat(LOWEST_WRITER_FORMAT)}, and later ` +
    `for appends, and of format ${STORE_FORMAT} for readmodel documents). ` +
    `Stop the instances of mneme ${releaseOfFormat(writerFormat)}${earlier} and run mneme ${STORE_RELEASE} or later; see docs/upgrading.md, Rolling deploys`
  );
}

/** A SQL string literal (the message has no backslashes; quotes are doubled). */
function literal(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

/** The trigger function both refusals use: raises its argument. */
function refusalFunction(qschema: string): string {
  return `CREATE OR REPLACE FUNCTION ${qschema}.mneme_refuse_old_writer() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    BEGIN
      RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = '${SQLSTATE_OLD_WRITER}';
    END
    $fn$`;
}

/** DDL of the events table's refusal of appends without event versions (0.1.0). */
export function refuseUnversionedAppends(qschema: string, schema: string): string[] {
  const message = literal(oldWriterMessage(schema, 1, "an append without event versions"));
  return [
    refusalFunction(qschema),
    `ALTER TABLE ${qschema}.events ALTER COLUMN event_version SET DEFAULT 0`,
    `DROP TRIGGER IF EXISTS mneme_refuse_unversioned ON ${qschema}.events`,
    `CREATE TRIGGER mneme_refuse_unversioned BEFORE INSERT ON ${qschema}.events
      FOR EACH ROW WHEN (NEW.event_version = 0) EXECUTE FUNCTION ${qschema}.mneme_refuse_old_writer(${message})`,
  ];
}

/** The body of the 0.1 signature of `mneme_append`: it refuses (see the file comment). */
export function unversionedAppendBody(schema: string): string {
  return `BEGIN
        RAISE EXCEPTION '%', ${literal(oldWriterMessage(schema, 1, "this call of mneme_append (the signature of 0.1.0)"))}
          USING ERRCODE = '${SQLSTATE_OLD_WRITER}';
      END`;
}

/** DDL of a documents table's refusal of documents written without a tenant (0.1.0, 0.2.0-pre). */
export function refuseUnscopedDocuments(qschema: string, docs: string, schema: string): string[] {
  const message = literal(oldWriterMessage(schema, 2, "a readmodel document written without its tenant"));
  return [
    refusalFunction(qschema),
    `ALTER TABLE ${docs} ALTER COLUMN tenant_uuid SET DEFAULT ${literal(UNSCOPED_WRITER)}`,
    `DROP TRIGGER IF EXISTS mneme_refuse_unscoped ON ${docs}`,
    `CREATE TRIGGER mneme_refuse_unscoped BEFORE INSERT OR UPDATE ON ${docs}
      FOR EACH ROW WHEN (NEW.tenant_uuid = ${literal(UNSCOPED_WRITER)}) EXECUTE FUNCTION ${qschema}.mneme_refuse_old_writer(${message})`,
  ];
}
