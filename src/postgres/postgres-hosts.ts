import { MnemeError } from "../model/errors.js";

/** One server of a connection string: `label` is `host:port` (no credentials), `connectionString` a URL node-postgres parses. */
export interface PostgresHost {
  readonly label: string;
  readonly connectionString: string;
}

/** A connection string split into its servers, as libpq reads one. */
export interface PostgresHosts {
  readonly hosts: readonly PostgresHost[];
  /**
   * True when mneme must choose the writable server itself: several hosts, or
   * `target_session_attrs=read-write` (or `primary`) given for one. node-postgres
   * neither reads several hosts nor checks what a server accepts.
   */
  readonly chooseWritable: boolean;
  /** libpq's `connect_timeout` (seconds) in milliseconds, when given; node-postgres ignores the parameter. */
  readonly connectTimeoutMs: number | undefined;
}

const URL_PREFIX = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/s;
const KEYWORDS = /^\s*[A-Za-z_]+\s*=/;
/** libpq's values of target_session_attrs that let mneme write. */
const WRITABLE_ATTRS = new Set(["read-write", "primary"]);

/**
 * Reads a connection string with one or several hosts, in either libpq form:
 * a URL (`postgres://u@hostA:5432,hostB:5433/db?sslmode=require`) or keywords
 * (`host=hostA,hostB port=5432,5433 dbname=db user=u`). Each host becomes a URL
 * of its own; every other part is kept. Throws INVALID_REQUEST for what libpq
 * would refuse (as many ports as hosts, or one) and for a `target_session_attrs`
 * that accepts a read-only server (mneme writes).
 */
export function parsePostgresHosts(connectionString: string): PostgresHosts {
  const url = URL_PREFIX.exec(connectionString);
  if (url !== null) return fromUrl(url[1] as string, url[2] as string, url[3] as string);
  if (KEYWORDS.test(connectionString)) return fromKeywords(connectionString);
  // Anything else (a socket path and a database, "/var/run/postgresql db") is node-postgres's to read.
  return { hosts: [{ label: "postgres", connectionString }], chooseWritable: false, connectTimeoutMs: undefined };
}

/** The connection string without its password or secret-looking parameters, every host kept. */
export function redactConnectionString(connectionString: string): string {
  const url = URL_PREFIX.exec(connectionString);
  if (url === null) {
    // A keyword string: keep only what cannot be a secret.
    const kept = connectionString
      .split(/\s+/)
      .filter((kv) => /^(host|port|dbname|user)=/.test(kv))
      .join(" ");
    return kept === "" ? "postgres" : kept;
  }
  const [, scheme, authority, rest] = url as unknown as [string, string, string, string];
  const at = authority.lastIndexOf("@");
  const hostList = authority.slice(at + 1);
  try {
    // The URL class reads one host: give it a stand-in, then put the list back.
    const u = new URL(`${scheme}${at >= 0 ? `${authority.slice(0, at)}@` : ""}redacted.invalid${rest}`);
    u.password = "";
    for (const k of [...u.searchParams.keys()]) if (/pass|secret|key|token/i.test(k)) u.searchParams.delete(k);
    return u.toString().replace("redacted.invalid", hostList);
  } catch {
    return "postgres";
  }
}

function fromUrl(scheme: string, authority: string, rest: string): PostgresHosts {
  const at = authority.lastIndexOf("@");
  const userinfo = at >= 0 ? authority.slice(0, at + 1) : "";
  const entries = authority.slice(at + 1).split(",");
  const { rest: kept, attrs, connectTimeout } = takeParameters(rest);
  checkAttrs(attrs);
  const hosts = entries.map((entry) => {
    if (entries.length > 1 && entry === "") throw invalid("an empty host in the host list");
    return { label: entry === "" ? "localhost" : entry, connectionString: `${scheme}${userinfo}${entry}${kept}` };
  });
  return { hosts, chooseWritable: hosts.length > 1 || attrs !== undefined, connectTimeoutMs: timeoutMs(connectTimeout) };
}

/** Takes target_session_attrs and connect_timeout out of a URL's path-and-query (node-postgres ignores both). */
function takeParameters(rest: string): { rest: string; attrs: string | undefined; connectTimeout: string | undefined } {
  const q = rest.indexOf("?");
  if (q < 0) return { rest, attrs: undefined, connectTimeout: undefined };
  const hash = rest.indexOf("#", q);
  const query = rest.slice(q + 1, hash < 0 ? undefined : hash);
  const params = new URLSearchParams(query);
  const attrs = params.get("target_session_attrs") ?? undefined;
  const connectTimeout = params.get("connect_timeout") ?? undefined;
  if (attrs === undefined) return { rest, attrs, connectTimeout };
  params.delete("target_session_attrs");
  const search = params.toString();
  return { rest: `${rest.slice(0, q)}${search === "" ? "" : `?${search}`}`, attrs, connectTimeout };
}

function fromKeywords(connectionString: string): PostgresHosts {
  const kv = readKeywords(connectionString);
  checkAttrs(kv.get("target_session_attrs"));
  const hostList = (kv.get("host") ?? kv.get("hostaddr") ?? "localhost").split(",");
  const ports = (kv.get("port") ?? "").split(",").filter((p) => p !== "");
  if (ports.length > 1 && ports.length !== hostList.length) {
    throw invalid(`${String(ports.length)} ports for ${String(hostList.length)} hosts (give one port, or one per host)`);
  }
  const user = kv.get("user");
  const password = kv.get("password");
  const userinfo =
    user === undefined ? "" : `${encodeURIComponent(user)}${password === undefined ? "" : `:${encodeURIComponent(password)}`}@`;
  const db = encodeURIComponent(kv.get("dbname") ?? "");
  const others = new URLSearchParams();
  for (const [k, v] of kv)
    if (!["host", "hostaddr", "port", "user", "password", "dbname", "target_session_attrs"].includes(k)) others.set(k, v);
  const hosts = hostList.map((host, i) => {
    if (host === "") throw invalid("an empty host in the host list");
    const port = ports.length === 0 ? "5432" : ((ports.length === 1 ? ports[0] : ports[i]) as string);
    const params = new URLSearchParams(others);
    let authority = `${host.includes(":") ? `[${host}]` : host}:${port}`;
    // A socket directory goes as the host parameter (node-postgres reads it there).
    if (host.startsWith("/")) {
      params.set("host", host);
      params.set("port", port);
      authority = "";
    }
    const search = params.toString();
    return { label: `${host}:${port}`, connectionString: `postgresql://${userinfo}${authority}/${db}${search === "" ? "" : `?${search}`}` };
  });
  return {
    hosts,
    chooseWritable: hosts.length > 1 || kv.has("target_session_attrs"),
    connectTimeoutMs: timeoutMs(kv.get("connect_timeout")),
  };
}

/** libpq's keyword = value pairs; a value may be single-quoted, with \' and \\ inside. */
function readKeywords(s: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /\s*([A-Za-z_]+)\s*=\s*(?:'((?:[^'\\]|\\.)*)'|(\S*))/gy;
  let m: RegExpExecArray | null;
  let end = 0;
  while ((m = re.exec(s)) !== null && m[0] !== "") {
    out.set(m[1] as string, m[2] === undefined ? (m[3] as string) : m[2].replace(/\\(.)/g, "$1"));
    end = re.lastIndex;
  }
  if (s.slice(end).trim() !== "") throw invalid(`cannot read "${s.slice(end).trim().split(/\s/)[0] ?? ""}" as keyword=value`);
  return out;
}

function checkAttrs(attrs: string | undefined): void {
  if (attrs !== undefined && !WRITABLE_ATTRS.has(attrs)) {
    throw invalid(
      `target_session_attrs=${attrs} may choose a read-only server; mneme writes, so give read-write or primary (or leave it out)`,
    );
  }
}

function timeoutMs(seconds: string | undefined): number | undefined {
  if (seconds === undefined) return undefined;
  const n = Number(seconds);
  if (!Number.isInteger(n) || n < 0) throw invalid(`connect_timeout must be a whole number of seconds, got "${seconds}"`);
  // libpq: 0 waits for ever; a value under 2 s counts as 2 s.
  return n === 0 ? 0 : Math.max(n, 2) * 1000;
}

function invalid(what: string): MnemeError {
  return new MnemeError("INVALID_REQUEST", `createPostgresBackends: connectionString: ${what}`);
}
