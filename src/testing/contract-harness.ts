import { afterEach, beforeEach, describe, expect, it, type TestContext } from "vitest";
import { isMnemeError, type MnemeErrorCode } from "../model/errors.js";
import type { ContractOptions } from "./contract-options.js";

/** What every store has: the suites call init() on a fresh store and close() after the test. */
export interface ContractStore {
  init(): Promise<void>;
  close(): Promise<void>;
}

/** Registers one contract test; `fn` gets the test's fresh, initialised store. */
export type ContractTest<S> = (title: string, fn: (store: S, ctx: TestContext) => Promise<void>, timeoutMs?: number) => void;

/** A conformance suite: registers its tests for the store `factory` makes, under `name` (see {@link defineContract}). */
export type ContractSuite<S> = (name: string, factory: () => Promise<S>, opts?: ContractOptions<S>) => void;

/** A conformance suite named `suite` whose tests `body` registers (run in the frame of {@link describeContract}). */
export function defineContract<S extends ContractStore>(suite: string, body: (test: ContractTest<S>) => void): ContractSuite<S> {
  return (name, factory, opts) => describeContract(suite, name, factory, opts, body);
}

/** Follows nextCursor to the end; every page but the last must be full. */
export async function listAllPages<T>(
  list: (opts: { limit: number; prefix?: string; cursor?: string }) => Promise<{ items: T[]; nextCursor?: string }>,
  limit: number,
  prefix?: string,
): Promise<T[][]> {
  const pages: T[][] = [];
  let cursor: string | undefined;
  for (let guard = 0; guard < 10_000; guard++) {
    const page = await list({ limit, ...(prefix === undefined ? {} : { prefix }), ...(cursor === undefined ? {} : { cursor }) });
    pages.push(page.items);
    if (page.nextCursor === undefined) return pages;
    expect(page.items).toHaveLength(limit);
    cursor = page.nextCursor;
  }
  return expect.fail("paging did not end");
}

/**
 * The frame shared by the conformance suites: a describe block whose tests each
 * get a fresh store from `factory` (init() called, cleanup and close() after),
 * with `opts.skip` applied by exact title.
 */
export function describeContract<S extends ContractStore>(
  suite: string,
  name: string,
  factory: () => Promise<S>,
  opts: ContractOptions<S> | undefined,
  body: (test: ContractTest<S>) => void,
): void {
  const skips = new Map<string, string>();
  for (const s of opts?.skip ?? []) {
    if (typeof s.reason !== "string" || s.reason.trim() === "") throw new Error(`${suite}: every skip needs a reason`);
    for (const t of s.tests) skips.set(t, s.reason);
  }
  const failures = new Map<string, string>();
  for (const s of opts?.expectFailures ?? []) {
    if (typeof s.reason !== "string" || s.reason.trim() === "") throw new Error(`${suite}: every expected failure needs a reason`);
    for (const t of s.tests) failures.set(t, s.reason);
  }

  describe(`${suite}: ${name}`, () => {
    let store: S | undefined;
    beforeEach(async () => {
      store = undefined;
      const s = await factory();
      store = s;
      await s.init();
    });
    afterEach(async () => {
      const s = store;
      store = undefined;
      if (s === undefined) return;
      try {
        if (opts?.cleanup !== undefined) await opts.cleanup(s);
      } finally {
        await s.close();
      }
    });

    const titles = new Set<string>();
    const test: ContractTest<S> = (title, fn, timeoutMs) => {
      if (titles.has(title)) throw new Error(`${suite}: duplicate test title "${title}"`);
      titles.add(title);
      const reason = skips.get(title);
      if (reason !== undefined) {
        it.skip(`${title} (skipped: ${reason})`, () => {});
        return;
      }
      const failing = failures.get(title);
      (failing === undefined ? it : it.fails)(
        failing === undefined ? title : `${title} (must fail: ${failing})`,
        async (ctx) => {
          if (store === undefined) throw new Error("the store factory did not produce a store");
          await fn(store, ctx);
        },
        timeoutMs,
      );
    };
    body(test);

    const unknown = [...skips.keys(), ...failures.keys()].filter((t) => !titles.has(t));
    if (unknown.length > 0) throw new Error(`${suite}: skip names unknown tests: ${unknown.map((t) => JSON.stringify(t)).join(", ")}`);
  });
}

/**
 * Asserts that `call()` returns a promise that rejects with a MnemeError of
 * `code` (a synchronous throw fails: callers chain `.catch`). Returns the error.
 */
export async function expectRejectsWith(call: () => PromiseLike<unknown>, code: MnemeErrorCode): Promise<Error> {
  let p: PromiseLike<unknown>;
  try {
    p = call();
  } catch (e) {
    expect.fail(`expected a promise rejecting with ${code}, but the call threw synchronously: ${String(e)}`);
  }
  try {
    await p;
  } catch (e) {
    if (!isMnemeError(e, code)) {
      const got = isMnemeError(e) ? `MnemeError ${e.code}: ${e.message}` : String(e);
      expect.fail(`expected MnemeError ${code}, got ${got}`);
    }
    return e;
  }
  return expect.fail(`expected a rejection with ${code}, but the call resolved`);
}

/** Collects every page of an async iterable of pages. */
export async function collectPages<T>(pages: AsyncIterable<T[]>): Promise<T[][]> {
  const out: T[][] = [];
  for await (const p of pages) out.push(p);
  return out;
}

/** A promise with its resolve function, for tests that must control when something finishes. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Lets pending I/O and timers run (a macrotask turn), without asserting anything about time. */
export function settle(ms = 0): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A uuid v7 (version nibble 7, RFC 4122 variant). */
export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** ns timestamps of this era: integers above 1.6e18 (2020) and below 1e19. */
export function expectNs(v: unknown): void {
  expect(typeof v).toBe("number");
  expect(Number.isInteger(v)).toBe(true);
  expect(v as number).toBeGreaterThan(1.6e18);
  expect(v as number).toBeLessThan(1e19);
}

/** A connectionInfo must not carry a password (user:secret@host). */
export function expectNoSecret(connectionInfo: string): void {
  expect(typeof connectionInfo).toBe("string");
  expect(connectionInfo).not.toMatch(/\/\/[^/@:\s]*:[^/@\s]+@/);
  expect(connectionInfo.toLowerCase()).not.toMatch(/password=/);
}

/** Shared test: close() twice resolves, and a later call rejects with STORE_CLOSED. */
export async function expectClosedBehaviour(store: ContractStore, call: () => PromiseLike<unknown>): Promise<void> {
  await store.close();
  await store.close();
  await expectRejectsWith(call, "STORE_CLOSED");
}
