/** The orders of test/reactions/reactions-crash.int.test.ts and its child process: their ids and which the provider refuses. */
import { v5 as uuidv5 } from "uuid";

export const ORDERS = 12;
export const PAYMENT_TIMEOUT_MS = 1500;
export const NS = "0b9d3f5e-7c2a-4e1b-9f60-1a2b3c4d5e6f";
/** The uuid of order `i` and of the command that places it. */
export const orderUuidOf = (i: number): string => uuidv5(`order ${i}`, NS);
export const placeCommandOf = (i: number): string => uuidv5(`place ${i}`, NS);
export const refused = (i: number): boolean => i % 3 === 0;
