/**
 * Connection strings with several hosts, as libpq reads them: each host
 * becomes a URL node-postgres can parse, the rest of the string is kept, and
 * what libpq refuses (or what would let mneme land on a read-only server) is
 * INVALID_REQUEST.
 */
import { describe, expect, it } from "vitest";
import { parse } from "pg-connection-string";
import { isMnemeError } from "mneme";
import { createPostgresBackends } from "mneme/postgres";
import { parsePostgresHosts, redactConnectionString } from "../../src/postgres/postgres-hosts.js";

function refused(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    if (isMnemeError(e, "INVALID_REQUEST")) return e.message;
    throw e;
  }
  throw new Error("not refused");
}

describe("parsePostgresHosts", () => {
  it("splits a URL's host list, keeping user, password, database and parameters for each host", () => {
    const p = parsePostgresHosts("postgres://app:s%40cret@hostA:5432,hostB:5433,[::1]:5434/shop?sslmode=disable&application_name=x");
    expect(p.chooseWritable).toBe(true);
    expect(p.hosts.map((h) => h.label)).toEqual(["hostA:5432", "hostB:5433", "[::1]:5434"]);
    const configs = p.hosts.map((h) => parse(h.connectionString));
    expect(configs.map((c) => [c.host, c.port])).toEqual([
      ["hostA", "5432"],
      ["hostB", "5433"],
      ["::1", "5434"],
    ]);
    for (const c of configs) {
      expect([c.user, c.password, c.database, c.application_name]).toEqual(["app", "s@cret", "shop", "x"]);
    }
  });

  it("leaves a one-host URL as it is, unless target_session_attrs asks for a writable server", () => {
    const s = "postgresql://u@db.example:6000/app?sslmode=disable";
    expect(parsePostgresHosts(s)).toEqual({
      hosts: [{ label: "db.example:6000", connectionString: s }],
      chooseWritable: false,
      connectTimeoutMs: undefined,
    });
    const rw = parsePostgresHosts("postgres://u@db:5432/app?target_session_attrs=read-write&connect_timeout=3");
    expect(rw.chooseWritable).toBe(true);
    expect(rw.connectTimeoutMs).toBe(3000);
    expect(rw.hosts[0]!.connectionString).not.toContain("target_session_attrs");
    expect(parsePostgresHosts("postgres://u@a,b/app?target_session_attrs=primary").hosts).toHaveLength(2);
    // libpq: 0 waits for ever, less than 2 s counts as 2 s.
    expect(parsePostgresHosts("postgres://a,b/x?connect_timeout=1").connectTimeoutMs).toBe(2000);
    expect(parsePostgresHosts("postgres://a,b/x?connect_timeout=0").connectTimeoutMs).toBe(0);
  });

  it("reads libpq keywords: one port for all hosts or one per host, quoted values", () => {
    const p = parsePostgresHosts("host=hostA,hostB port=5432,5433 dbname=shop user=app password=s3cret sslmode=disable");
    expect(p.hosts.map((h) => h.label)).toEqual(["hostA:5432", "hostB:5433"]);
    const c = parse(p.hosts[1]!.connectionString);
    expect([c.host, c.port, c.database, c.user, c.sslmode]).toEqual(["hostB", "5433", "shop", "app", "disable"]);
    const quoted = parsePostgresHosts(String.raw`host=a,b port=6000 user=u password='it\'s a \\ secret' dbname=d`);
    expect(quoted.hosts.map((h) => h.label)).toEqual(["a:6000", "b:6000"]);
    expect(parse(quoted.hosts[0]!.connectionString).password).toBe(String.raw`it's a \ secret`);
    const socket = parsePostgresHosts("host=/var/run/postgresql,hostB port=5432 dbname=d");
    expect(parse(socket.hosts[0]!.connectionString).host).toBe("/var/run/postgresql");
    const one = parsePostgresHosts("host=db port=5433 dbname=d user=u");
    expect(one.chooseWritable).toBe(false);
    expect(parse(one.hosts[0]!.connectionString)).toMatchObject({ host: "db", port: "5433", database: "d", user: "u" });
  });

  it("refuses what libpq refuses and a target that accepts a read-only server", () => {
    expect(refused(() => parsePostgresHosts("host=a,b,c port=1,2 dbname=d"))).toMatch(/2 ports for 3 hosts/);
    expect(refused(() => parsePostgresHosts("postgres://a,,b/d"))).toMatch(/empty host/);
    expect(refused(() => parsePostgresHosts("postgres://a,b/d?target_session_attrs=any"))).toMatch(/target_session_attrs=any/);
    expect(refused(() => parsePostgresHosts("host=a target_session_attrs=standby"))).toMatch(/read-only server/);
    expect(refused(() => parsePostgresHosts("postgres://a,b/d?connect_timeout=soon"))).toMatch(/connect_timeout/);
    expect(refused(() => parsePostgresHosts("host=a dbname=d 'stray"))).toMatch(/keyword=value/);
    expect(refused(() => createPostgresBackends({ connectionString: "postgres://a,b/d?target_session_attrs=read-only" }))).toMatch(
      /read-only/,
    );
  });

  it("describes every host without the password", () => {
    expect(redactConnectionString("postgres://app:hunter2@hostA:5432,hostB:5433/shop?password=x&sslmode=disable")).toBe(
      "postgres://app@hostA:5432,hostB:5433/shop?sslmode=disable",
    );
    expect(redactConnectionString("host=a,b port=1,2 password=hunter2 dbname=d")).toBe("host=a,b port=1,2 dbname=d");
  });
});
