import { STORE_RELEASE } from "../store/store-format.js";
import { literal, unversionedAppendBody } from "./postgres-old-writers.js";

/**
 * The refusal of mneme 0.1.0 **at start** on a schema it would misread (see
 * docs/upgrading.md, Downgrades). 0.1.0 reads no format record and its code
 * cannot change; its `init()` runs only `CREATE ... IF NOT EXISTS` and one
 * `CREATE OR REPLACE FUNCTION mneme_append(...)` (its own signature, its
 * parameter names). Postgres refuses to replace a function whose input
 * parameters are named otherwise ("cannot change name of input parameter"),
 * naming the old name: so while the schema refuses 0.1.0's writers, that
 * signature's first parameter is named {@link OLD_START_MARKER}, and 0.1.0's
 * `init()`, hence its `facade.start()`, fails with a message naming both
 * releases, whatever its checkpoints, before it serves anything.
 *
 * 0.2.0 sends the very same statement in its `init()` (it keeps that
 * signature for 0.1's calls), and 0.2.0 may run on this schema. It differs
 * from 0.1.0 in reading the format record first, in the same transaction,
 * under the schema's init lock: so `mneme_store_format` is a view over the
 * record table (`mneme_store_format_record`) whose read renames the
 * parameters back for that transaction ({@link formatRecordDdl}), and a
 * deferred trigger names them so again when it commits. No other transaction
 * ever sees the parameters renamed back (catalog changes are transactional);
 * this release reads the record table itself.
 *
 * In compatibility mode (a rolling deploy from 0.1.0) the signature keeps
 * 0.1.0's names: its instances start as before.
 */
export const OLD_START_MARKER = `refused: mneme 0.1.0 misreads this store of mneme ${STORE_RELEASE}`;

/** The argument types of 0.1's `mneme_append` (the signature kept for its calls). */
const OLD_SIGNATURE =
  "bigint, text, text, text[], text[], text[], text[], text[], integer[], text[], bigint[], jsonb[], jsonb[], text[], integer[]";

/** The table of the schema's format record, read and written by this release. */
export const FORMAT_RECORD_TABLE = "mneme_store_format_record";

/** 0.1's `mneme_append`, created anew: its first parameter named {@link OLD_START_MARKER} when `marked`. */
function oldSignature(qschema: string, schema: string, admit: boolean, marked: boolean): string {
  // Marked only in strict mode, whose body refers to no parameter.
  return `CREATE OR REPLACE FUNCTION ${qschema}.mneme_append(
        ${firstParameter(marked)} bigint, p_channel text, p_note text,
        p_event_uuids text[], p_tenant_uuids text[], p_domains text[], p_names text[], p_aggregate_uuids text[],
        p_versions integer[], p_command_uuids text[], p_created_ats bigint[], p_req_ctxs jsonb[], p_payloads jsonb[],
        p_expected_aggregates text[], p_expected_versions integer[])
      RETURNS TABLE (base_position bigint, versions integer[])
      LANGUAGE plpgsql VOLATILE AS $fn$
      ${unversionedAppendBody(qschema, schema, admit)}
      $fn$`;
}

/** The name of the first parameter of 0.1's signature: the mark, or 0.1.0's own name. */
function firstParameter(marked: boolean): string {
  return marked ? `"${OLD_START_MARKER}"` : "p_lock_key";
}

/**
 * DDL of 0.1's `mneme_append` signature (its calls refused, or run in compatibility mode), marked against
 * 0.1.0's start unless `admit` (see the file comment). Dropped first only when its first parameter must be
 * renamed (a replacement cannot rename it; a function replaced in place keeps its id, so a 0.1.0 instance
 * calling it meanwhile in compatibility mode is not disturbed).
 */
export function oldSignatureDdl(qschema: string, schema: string, admit: boolean): string[] {
  const wanted = admit ? "p_lock_key" : OLD_START_MARKER;
  return [
    `DO $do$
      BEGIN
        IF EXISTS (SELECT 1 FROM pg_proc WHERE oid = to_regprocedure(${literal(`${qschema}.mneme_append(${OLD_SIGNATURE})`)})
            AND proargnames[1] IS DISTINCT FROM ${literal(wanted)}) THEN
          DROP FUNCTION ${qschema}.mneme_append(${OLD_SIGNATURE});
        END IF;
      END
      $do$`,
    oldSignature(qschema, schema, admit, !admit),
    ...formatRecordDdl(qschema, schema),
  ];
}

/**
 * DDL of the format record: its table (`mneme_store_format` of 0.2.0 renamed, or a new one), and the view of
 * that name through which 0.2.0 reads it, with the read that lets 0.2.0's `init()` pass the mark and the
 * deferred trigger that puts the mark back at commit. Idempotent; runs under the schema's init lock.
 */
export function formatRecordDdl(qschema: string, schema: string): string[] {
  const record = `${qschema}.${FORMAT_RECORD_TABLE}`;
  const view = `${qschema}.mneme_store_format`;
  const drop = `DROP FUNCTION IF EXISTS ${qschema}.mneme_append(${OLD_SIGNATURE})`;
  const rearm = `${qschema}.mneme_rearm_old_start`;
  return [
    `CREATE SCHEMA IF NOT EXISTS ${qschema}`,
    // 0.2.0 kept the record in a table of the view's name: renamed (kept when both exist: the record table is this release's).
    `DO $do$
      BEGIN
        IF (SELECT relkind FROM pg_class WHERE oid = to_regclass(${literal(view)})) = 'r' THEN
          IF to_regclass(${literal(record)}) IS NULL THEN
            ALTER TABLE ${view} RENAME TO ${FORMAT_RECORD_TABLE};
          ELSE
            DROP TABLE ${view};
          END IF;
        END IF;
      END
      $do$`,
    `CREATE TABLE IF NOT EXISTS ${record} (
      id smallint PRIMARY KEY CHECK (id = 1),
      format integer NOT NULL,
      lowest_writer_format integer NOT NULL,
      upgraded_by text NOT NULL,
      upgraded_at bigint NOT NULL)`,
    `CREATE TABLE IF NOT EXISTS ${rearm} (at bigint)`,
    `CREATE OR REPLACE FUNCTION ${qschema}.mneme_mark_old_start() RETURNS trigger
      LANGUAGE plpgsql AS $mark$
      BEGIN
        DELETE FROM ${rearm};
        EXECUTE ${literal(drop)};
        EXECUTE ${literal(oldSignature(qschema, schema, false, true))};
        RETURN NULL;
      END
      $mark$`,
    `DROP TRIGGER IF EXISTS mneme_mark_old_start ON ${rearm}`,
    `CREATE CONSTRAINT TRIGGER mneme_mark_old_start AFTER INSERT ON ${rearm}
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${qschema}.mneme_mark_old_start()`,
    // The read of an earlier release (0.2.0's init): the mark comes off for this transaction and back at its commit.
    `CREATE OR REPLACE FUNCTION ${qschema}.mneme_format_read() RETURNS boolean
      LANGUAGE plpgsql VOLATILE AS $read$
      BEGIN
        IF current_setting('transaction_read_only') = 'off' AND EXISTS (
          SELECT 1 FROM pg_proc WHERE oid = to_regprocedure(${literal(`${qschema}.mneme_append(${OLD_SIGNATURE})`)})
            AND proargnames[1] = ${literal(OLD_START_MARKER)}
        ) THEN
          EXECUTE ${literal(drop)};
          EXECUTE ${literal(oldSignature(qschema, schema, false, false))};
          INSERT INTO ${rearm} VALUES (0);
        END IF;
        RETURN true;
      END
      $read$`,
    `CREATE OR REPLACE VIEW ${view} AS
      SELECT id, format, lowest_writer_format, upgraded_by, upgraded_at FROM ${record} WHERE ${qschema}.mneme_format_read()`,
  ];
}
