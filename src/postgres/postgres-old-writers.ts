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
 *
 * **Compatibility mode.** While a schema admits 0.1.0's writers (a rolling
 * deploy entered with `rollingFrom: "0.1.0"`, its format record's
 * `lowest_writer_format` is 1), the same statements are admitted instead:
 *
 * - an event inserted without `event_version` is version 1 (the column's
 *   default is 1 again, and no trigger refuses it); the 0.1 signature of
 *   `mneme_append` runs the current append (0.1 knows no tenancy rule, so its
 *   aggregates are passed as global ones, as 0.1 wrote them);
 * - a readmodel document written without its tenant gets the tenant of the
 *   aggregate whose id is its key (the tenant of that aggregate's first
 *   event: a `ProjectionReadmodel`'s documents, and the built-in ones keyed by
 *   an aggregate); a document whose key names no aggregate keeps the marker,
 *   so no tenant-scoped read returns it (no leak across tenants) and trusted
 *   unscoped reads still do; finishing the rolling upgrade counts them, and a
 *   restore from zero of their readmodel writes them again with their tenant.
 *
 * Finishing the rolling upgrade (`facade.finishRollingUpgrade()`) runs the
 * DDL again in the strict mode above.
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

/** A SQL string literal (the text has no backslashes; quotes are doubled). */
export function literal(text: string): string {
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
function refuseUnversionedAppends(qschema: string, schema: string): string[] {
  const message = literal(oldWriterMessage(schema, 1, "an append without event versions"));
  return [
    refusalFunction(qschema),
    `ALTER TABLE ${qschema}.events ALTER COLUMN event_version SET DEFAULT 0`,
    `DROP TRIGGER IF EXISTS mneme_refuse_unversioned ON ${qschema}.events`,
    `CREATE TRIGGER mneme_refuse_unversioned BEFORE INSERT ON ${qschema}.events
      FOR EACH ROW WHEN (NEW.event_version = 0) EXECUTE FUNCTION ${qschema}.mneme_refuse_old_writer(${message})`,
  ];
}

/** DDL of the events table for appends without event versions (0.1.0): refused, or version 1 in compatibility mode. */
export function unversionedAppends(qschema: string, schema: string, admit: boolean): string[] {
  if (!admit) return refuseUnversionedAppends(qschema, schema);
  return [
    `ALTER TABLE ${qschema}.events ALTER COLUMN event_version SET DEFAULT 1`,
    `DROP TRIGGER IF EXISTS mneme_refuse_unversioned ON ${qschema}.events`,
  ];
}

/**
 * The body of the 0.1 signature of `mneme_append`: it refuses (see the file
 * comment), or in compatibility mode runs the current signature, with every
 * aggregate of the call global (0.1 knows no tenancy rule).
 */
export function unversionedAppendBody(qschema: string, schema: string, admit: boolean): string {
  if (admit) {
    return `BEGIN
        RETURN QUERY SELECT * FROM ${qschema}.mneme_append(p_lock_key, p_channel, p_note, p_event_uuids, p_tenant_uuids,
          p_domains, p_names, p_aggregate_uuids, p_versions, p_command_uuids, p_created_ats, p_req_ctxs, p_payloads,
          p_expected_aggregates, p_expected_versions, p_aggregate_uuids);
      END`;
  }
  return `BEGIN
        RAISE EXCEPTION '%', ${literal(oldWriterMessage(schema, 1, "this call of mneme_append (the signature of 0.1.0)"))}
          USING ERRCODE = '${SQLSTATE_OLD_WRITER}';
      END`;
}

/**
 * DDL of a documents table for documents written without a tenant (0.1.0,
 * 0.2.0-pre): refused, or in compatibility mode given the tenant of the
 * aggregate their key names (see the file comment).
 */
export function unscopedDocuments(qschema: string, docs: string, schema: string, admit: boolean): string[] {
  if (!admit) return [`DROP TRIGGER IF EXISTS mneme_scope_unscoped ON ${docs}`, ...refuseUnscopedDocuments(qschema, docs, schema)];
  const marker = literal(UNSCOPED_WRITER);
  return [
    `CREATE OR REPLACE FUNCTION ${qschema}.mneme_scope_old_document() RETURNS trigger
      LANGUAGE plpgsql AS $fn$
      DECLARE
        v_tenant text;
      BEGIN
        IF to_regclass(${literal(`${qschema}.events`)}) IS NOT NULL THEN
          SELECT e.tenant_uuid INTO v_tenant FROM ${qschema}.events e WHERE e.aggregate_uuid = NEW.key AND e.version = 1;
          IF FOUND THEN
            NEW.tenant_uuid := v_tenant;
          END IF;
        END IF;
        RETURN NEW;
      END
      $fn$`,
    `ALTER TABLE ${docs} ALTER COLUMN tenant_uuid SET DEFAULT ${marker}`,
    `DROP TRIGGER IF EXISTS mneme_refuse_unscoped ON ${docs}`,
    `DROP TRIGGER IF EXISTS mneme_scope_unscoped ON ${docs}`,
    `CREATE TRIGGER mneme_scope_unscoped BEFORE INSERT OR UPDATE ON ${docs}
      FOR EACH ROW WHEN (NEW.tenant_uuid = ${marker}) EXECUTE FUNCTION ${qschema}.mneme_scope_old_document()`,
  ];
}

/**
 * Documents an older release wrote without their tenant during a rolling deploy whose tenant could not be
 * derived (their key names no aggregate), by collection: only unscoped reads see them.
 */
export async function countUnscopedDocuments(
  docs: string,
  query: (sql: string) => Promise<{ rows: { collection: string; n: string }[] }>,
): Promise<{ collection: string; documents: number }[]> {
  const res = await query(
    `SELECT collection, count(*)::text AS n FROM ${docs} WHERE tenant_uuid = ${literal(UNSCOPED_WRITER)} GROUP BY collection ORDER BY collection`,
  );
  return res.rows.map((r) => ({ collection: r.collection, documents: Number(r.n) }));
}

/** DDL of a documents table's refusal of documents written without a tenant (0.1.0, 0.2.0-pre). */
function refuseUnscopedDocuments(qschema: string, docs: string, schema: string): string[] {
  const message = literal(oldWriterMessage(schema, 2, "a readmodel document written without its tenant"));
  return [
    refusalFunction(qschema),
    `ALTER TABLE ${docs} ALTER COLUMN tenant_uuid SET DEFAULT ${literal(UNSCOPED_WRITER)}`,
    `DROP TRIGGER IF EXISTS mneme_refuse_unscoped ON ${docs}`,
    `CREATE TRIGGER mneme_refuse_unscoped BEFORE INSERT OR UPDATE ON ${docs}
      FOR EACH ROW WHEN (NEW.tenant_uuid = ${literal(UNSCOPED_WRITER)}) EXECUTE FUNCTION ${qschema}.mneme_refuse_old_writer(${message})`,
  ];
}
