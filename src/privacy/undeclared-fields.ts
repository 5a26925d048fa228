/**
 * The registration check of a domain's commands: a command whose schema has
 * a field named like a personal field of one of the domain's events, while
 * the command declares no such personal field, would keep that value in
 * clear wherever mneme stores the command. It is warned about
 * (`MNEME_PERSONAL_DATA_UNDECLARED`), not refused: the name may be a coincidence.
 */
import type { CommandType, EventType } from "../model/tokens.js";
import type { JsonSchema } from "../model/types.js";
import { pointerTokens } from "./personal-fields.js";

/** The code of the process warning for command fields that look personal but are not declared. */
export const PERSONAL_DATA_UNDECLARED_WARNING = "MNEME_PERSONAL_DATA_UNDECLARED";

/** One command and the fields of its schema that look personal but are not declared. */
export interface UndeclaredPersonalFields {
  /** `Domain.Command` */
  readonly command: string;
  readonly fields: readonly string[];
}

/**
 * The commands of a domain (those with a schema) whose top-level schema
 * properties are named like the last token of a personal field of an event
 * of the domain, and are neither in their `personalData` nor in their
 * `secretFields` (a secret field is never recorded).
 */
export function undeclaredPersonalFields(
  commands: Iterable<CommandType<any, any>>,
  events: Iterable<EventType<any>>,
  schemaOf: (type: CommandType<any, any>) => JsonSchema | undefined,
): UndeclaredPersonalFields[] {
  const personal = new Set<string>();
  for (const e of events) {
    for (const field of e.personalData?.fields ?? []) {
      const tokens = pointerTokens(field);
      const last = tokens[tokens.length - 1];
      // A protected array element ("/phones/0") is named by its array.
      const name = last !== undefined && /^(0|[1-9][0-9]*)$/.test(last) && tokens.length > 1 ? tokens[tokens.length - 2] : last;
      if (name !== undefined) personal.add(name);
    }
  }
  if (personal.size === 0) return [];
  const out: UndeclaredPersonalFields[] = [];
  for (const c of commands) {
    const properties = (schemaOf(c) as { properties?: unknown } | undefined)?.properties;
    if (typeof properties !== "object" || properties === null) continue;
    const declared = new Set<string>(c.secretFields);
    for (const f of c.personalData?.fields ?? []) declared.add(pointerTokens(f)[0] ?? "");
    const fields = Object.keys(properties).filter((k) => personal.has(k) && !declared.has(k));
    if (fields.length > 0) out.push({ command: `${c.domain}.${c.name}`, fields });
  }
  return out;
}
