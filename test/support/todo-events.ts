/** Events of the store tests. */
import type { NewEvent } from "mneme";

/** A Todo.TodoCreated event of `aggregateUuid` with `payload` and any other NewEvent fields. */
export const ev = (aggregateUuid: string, payload: unknown = {}, extra: Partial<NewEvent> = {}): NewEvent => ({
  domain: "Todo",
  name: "TodoCreated",
  aggregateUuid,
  payload,
  ...extra,
});
