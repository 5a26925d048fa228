import { MnemeError } from "../model/errors.js";
import type { SqlDialect } from "./sql-table-access.js";

/**
 * The first line of defence against a handler's SQL ending mneme's
 * transaction: a lexer of the dialect's comments, string literals, quoted
 * identifiers and (Postgres) dollar-quoted bodies, so that a statement is
 * judged by its words and not by its text. It refuses an empty statement,
 * more than one statement, and one that begins with a word that ends, nests
 * or reconfigures the transaction. The backends check again after each
 * statement that the transaction is still the one mneme opened (and SQLite
 * asks the engine what a statement does before running it): this lexer keeps
 * the transaction whole, those checks catch what a lexer could ever miss.
 */

/** Words that begin a transaction-control statement in SQLite or Postgres. */
const CONTROL = new Set(["BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE"]);

/** A word of the statement, upper-cased (keywords and unquoted identifiers). */
type Token = { readonly word: string } | { readonly other: true } | { readonly semicolon: true };

function bad(why: string): MnemeError {
  return new MnemeError("INVALID_REQUEST", `sql: ${why}`);
}

/** Postgres identifiers and dollar-quote tags: letters (any script), digits, _ and, after the first, $. */
function isWordStart(c: string): boolean {
  return /[A-Za-z_]/.test(c) || c.charCodeAt(0) >= 0x80;
}
function isWordPart(c: string, dialect: SqlDialect): boolean {
  return isWordStart(c) || /[0-9]/.test(c) || (c === "$" && dialect === "postgres");
}

/** The end (exclusive) of a quoted run opened at `i` by `open`, closed by `close`, where a doubled close is an escaped one. */
function quotedEnd(sql: string, i: number, close: string, backslashes: boolean): number {
  let j = i + 1;
  while (j < sql.length) {
    const c = sql[j]!;
    if (backslashes && c === "\\") {
      j += 2;
      continue;
    }
    if (c === close) {
      if (sql[j + 1] === close && close !== "]") {
        j += 2;
        continue;
      }
      return j + 1;
    }
    j++;
  }
  throw bad(`an unterminated ${close === "'" ? "string literal" : "quoted identifier"}`);
}

/** The end of a block comment opened at `i` (Postgres nests them, SQLite does not). */
function commentEnd(sql: string, i: number, dialect: SqlDialect): number {
  let depth = 1;
  let j = i + 2;
  while (j < sql.length) {
    if (sql.startsWith("*/", j)) {
      depth--;
      j += 2;
      if (depth === 0) return j;
    } else if (dialect === "postgres" && sql.startsWith("/*", j)) {
      depth++;
      j += 2;
    } else j++;
  }
  throw bad("an unterminated /* comment");
}

/** The end of a dollar-quoted body opened at `i` by `$tag$`, or undefined when `$` there opens none (a `$1` parameter). */
function dollarEnd(sql: string, i: number, dialect: SqlDialect): number | undefined {
  let j = i + 1;
  if (j < sql.length && sql[j] !== "$") {
    if (!isWordStart(sql[j]!)) return undefined;
    while (j < sql.length && isWordPart(sql[j]!, dialect) && sql[j] !== "$") j++;
    if (sql[j] !== "$") return undefined;
  }
  const tag = sql.slice(i, j + 1);
  const close = sql.indexOf(tag, j + 1);
  if (close < 0) throw bad(`an unterminated dollar-quoted string ${tag}`);
  return close + tag.length;
}

/** The tokens of `sql` that matter to the check: words, semicolons, and anything else as one kind. */
export function sqlTokens(sql: string, dialect: SqlDialect): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    if (c === "\0") throw bad("a statement must not contain NUL");
    if (/\s/.test(c)) {
      i++;
    } else if (sql.startsWith("--", i)) {
      const nl = sql.indexOf("\n", i);
      i = nl < 0 ? sql.length : nl + 1;
    } else if (sql.startsWith("/*", i)) {
      i = commentEnd(sql, i, dialect);
    } else if (c === ";") {
      out.push({ semicolon: true });
      i++;
    } else if (c === "'") {
      i = quotedEnd(sql, i, "'", false);
      out.push({ other: true });
    } else if (c === '"' || (dialect === "sqlite" && c === "`")) {
      i = quotedEnd(sql, i, c, false);
      out.push({ other: true });
    } else if (dialect === "sqlite" && c === "[") {
      i = quotedEnd(sql, i, "]", false);
      out.push({ other: true });
    } else if (dialect === "postgres" && c === "$") {
      const end = dollarEnd(sql, i, dialect);
      i = end ?? i + 1;
      out.push({ other: true });
    } else if (isWordStart(c)) {
      let j = i + 1;
      while (j < sql.length && isWordPart(sql[j]!, dialect)) j++;
      const word = sql.slice(i, j);
      // Postgres E'...' strings take backslash escapes: lex them as such, so an escaped quote does not end them.
      if (dialect === "postgres" && /^[Ee]$/.test(word) && sql[j] === "'") {
        i = quotedEnd(sql, j, "'", true);
        out.push({ other: true });
      } else {
        out.push({ word: word.toUpperCase() });
        i = j;
      }
    } else {
      i++;
      out.push({ other: true });
    }
  }
  return out;
}

const wordOf = (t: Token | undefined): string => (t !== undefined && "word" in t ? t.word : "");

/**
 * Where the first statement of `tokens` ends (exclusive): at its first `;`,
 * except in a statement that creates a body of statements, whose `;` are
 * its own up to the END that closes the body (CASE ... END counted inside):
 * SQLite's CREATE TRIGGER ... BEGIN ... END, Postgres's CREATE FUNCTION or
 * PROCEDURE ... BEGIN ATOMIC ... END. Such a body runs only when the trigger
 * or function does, never as a statement of the transaction.
 */
function statementEnd(tokens: readonly Token[], dialect: SqlDialect): number {
  const semicolon = tokens.findIndex((t) => "semicolon" in t);
  const firstEnd = semicolon < 0 ? tokens.length : semicolon;
  const head = tokens.slice(0, 5).map(wordOf);
  if (head[0] !== "CREATE") return firstEnd;
  const compound =
    dialect === "sqlite" ? head.slice(1, 3).includes("TRIGGER") : head.slice(1, 4).some((w) => w === "FUNCTION" || w === "PROCEDURE");
  if (!compound) return firstEnd;
  let open = -1;
  for (let i = 0; i < firstEnd; i++) {
    if (wordOf(tokens[i]) === "BEGIN" && (dialect === "sqlite" || wordOf(tokens[i + 1]) === "ATOMIC")) {
      open = i;
      break;
    }
  }
  if (open < 0) return firstEnd;
  let depth = 0;
  for (let i = open; i < tokens.length; i++) {
    const w = wordOf(tokens[i]);
    if (w === "BEGIN" || w === "CASE") depth++;
    else if (w === "END" && --depth === 0) return i + 1;
  }
  throw bad("a body opened by BEGIN has no END");
}

/**
 * Refuses (INVALID_REQUEST) a statement that is empty, holds more than one
 * statement, or would end, nest or reconfigure the transaction it runs in:
 * BEGIN, START TRANSACTION, COMMIT (and COMMIT PREPARED), END, ROLLBACK (TO),
 * ABORT, SAVEPOINT, RELEASE, PREPARE TRANSACTION, SET TRANSACTION and SET
 * SESSION CHARACTERISTICS, however commented, cased or spaced.
 */
export function assertSqlStatement(sql: string, dialect: SqlDialect): void {
  if (typeof sql !== "string") throw bad("a statement must be a non-empty string");
  const accepted = ACCEPTED[dialect];
  if (accepted.has(sql)) return;
  checkStatement(sql, dialect);
  if (sql.length <= ACCEPTED_MAX_LENGTH) {
    if (accepted.size >= ACCEPTED_MAX) accepted.clear();
    accepted.add(sql);
  }
}

/**
 * Texts that passed the check, per dialect: the check depends on the text
 * alone, and a handler sends the same few texts once per row, so each is
 * lexed once (bounded: cleared when full; long texts are not kept).
 */
const ACCEPTED: Record<SqlDialect, Set<string>> = { sqlite: new Set(), postgres: new Set() };
const ACCEPTED_MAX = 2_000;
const ACCEPTED_MAX_LENGTH = 4_096;

function checkStatement(sql: string, dialect: SqlDialect): void {
  const tokens = sqlTokens(sql, dialect);
  const end = statementEnd(tokens, dialect);
  const body = tokens.slice(0, end);
  if (tokens.slice(end).some((t) => !("semicolon" in t)))
    throw bad("one statement at a time: the text holds more than one (a ; followed by more)");
  if (body.length === 0) throw bad("a statement must be a non-empty string");
  const [first, second, third] = body.map((t) => ("word" in t ? t.word : ""));
  const control =
    CONTROL.has(first!) ||
    (first === "PREPARE" && second === "TRANSACTION") ||
    (first === "SET" && (second === "TRANSACTION" || (second === "SESSION" && third === "CHARACTERISTICS")));
  if (control) {
    throw bad(
      `${[first, second].filter((w) => w !== "").join(" ")} is not allowed: the handler's batch runs in mneme's transaction, which commits with the checkpoint`,
    );
  }
}
