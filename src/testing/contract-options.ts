/** One group of conformance tests a backend does not run, with the reason shown in the test's title. */
export interface ContractSkip {
  readonly reason: string;
  /** Exact test titles of the suite; an unknown title fails the suite, so typos do not skip silently. */
  readonly tests: readonly string[];
}

/**
 * Options of every `describe*Contract` suite: tests to skip (each with its
 * reason) and a cleanup run after each test, before the store is closed
 * (e.g. to drop a Postgres schema made by the factory).
 */
export interface ContractOptions<S = unknown> {
  readonly skip?: readonly ContractSkip[];
  /**
   * Tests that must fail on this store (each with its reason): for checking
   * that the suite catches a deliberately broken store. They pass only when
   * their body fails.
   */
  readonly expectFailures?: readonly ContractSkip[];
  readonly cleanup?: (store: S) => Promise<void>;
}
