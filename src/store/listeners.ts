import { MnemeError } from "../model/errors.js";

/**
 * Adds `listener` to `set`, wrapped so the same function can be registered
 * twice and removed once per registration; returns its remover.
 * INVALID_REQUEST (naming `what`) when `listener` is not a function.
 */
export function addListener<A extends unknown[]>(set: Set<(...args: A) => void>, listener: (...args: A) => void, what: string): () => void {
  if (typeof listener !== "function") throw new MnemeError("INVALID_REQUEST", `${what}: listener must be a function`);
  const entry = (...args: A): void => listener(...args);
  set.add(entry);
  return () => {
    set.delete(entry);
  };
}
