/**
 * What `facade.register(handler)` returns: the registered object with its
 * type. `facade.readmodel(handle)` and `ctx.readmodel(handle)` give it back
 * (a handle of another facade is UNKNOWN_EVENT_HANDLER). It imports nothing,
 * so FacadeHandle and the event-handler types can both name it.
 */
export interface ReadmodelHandle<T extends { readonly name: string } = { readonly name: string }> {
  readonly kind: "readmodelHandle";
  /** The name it is registered under (the eventHandlerName). */
  readonly name: string;
  /** The object given to `register`. */
  readonly readmodel: T;
}

/** True when `x` is a ReadmodelHandle. */
export function isReadmodelHandle(x: unknown): x is ReadmodelHandle {
  return typeof x === "object" && x !== null && (x as { kind?: unknown }).kind === "readmodelHandle";
}
