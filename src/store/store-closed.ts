import { MnemeError } from "../model/errors.js";

/** The STORE_CLOSED error a memory store rejects with once it is closed. */
export function storeClosed(store: string): MnemeError {
  return new MnemeError("STORE_CLOSED", `${store} is closed`);
}
