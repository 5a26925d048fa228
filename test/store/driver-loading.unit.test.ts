/**
 * Database drivers are optional peers loaded when a backend is made: a
 * missing one is a MnemeError naming the package and its install command; a
 * better-sqlite3 whose native module does not load names the runtime's own
 * SQLite driver, which needs none. (The packed
 * package installed without drivers is checked in package-install.int.test.ts.)
 */
import { describe, expect, it } from "vitest";
import { isMnemeError } from "mneme";
import { BETTER_SQLITE3, PG, driverInstallCommand, nativeBuildMissing, requireDriver } from "../../src/store/driver.js";

describe("requireDriver", () => {
  it("loads an installed driver", () => {
    expect(typeof requireDriver<{ Pool: unknown }>(PG).Pool).toBe("function");
    expect(typeof requireDriver<unknown>(BETTER_SQLITE3)).toBe("function");
  });

  it("a driver that is not installed is INVALID_REQUEST naming it, what needs it and the install command", () => {
    let caught: unknown;
    try {
      requireDriver({ name: "mneme-test-no-such-driver", range: "^1", neededBy: "mneme/test" });
    } catch (e) {
      caught = e;
    }
    expect(isMnemeError(caught, "INVALID_REQUEST")).toBe(true);
    expect((caught as Error).message).toBe(
      "mneme/test needs mneme-test-no-such-driver, which is not installed: it is an optional peer dependency of mneme, installed by the application that uses mneme/test. Install it: npm install mneme-test-no-such-driver@^1",
    );
  });

  it("names the ranges mneme supports", () => {
    expect(driverInstallCommand(BETTER_SQLITE3)).toBe("npm install better-sqlite3@^13");
    expect(driverInstallCommand(PG)).toBe("npm install pg@^8");
  });

  it("a better-sqlite3 whose native module does not load is told to reinstall it or use node:sqlite; other errors are not touched", () => {
    const e = nativeBuildMissing(new Error("Could not locate the bindings file. Tried:\n → /x/build/better_sqlite3.node"));
    expect(isMnemeError(e, "INVALID_REQUEST")).toBe(true);
    expect(e!.message).toContain("npm install better-sqlite3@^13");
    expect(e!.message).toContain('driver: "node:sqlite"');
    expect(e!.message).not.toContain("allowScripts");
    expect(nativeBuildMissing(new Error("SQLITE_CANTOPEN: unable to open database file"))).toBeUndefined();
  });
});
