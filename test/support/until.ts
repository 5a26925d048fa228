/**
 * Polls `check` until it holds, and fails naming `what` after `ms`: how a test
 * waits for another instance, a lease or a timer. The bound only turns a hang
 * into a failure; it never decides an outcome.
 */
export async function until(check: () => boolean | Promise<boolean>, what: string, ms = 15_000, everyMs = 10): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
