/**
 * What `facade.registerReadmodel(handler)` returns: the registered object with its
 * type. `facade.readmodel(handle)` and `ctx.readmodel(handle)` give it back
 * (a handle of another facade is UNKNOWN_EVENT_HANDLER). It imports nothing,
 * so FacadeHandle and the event-handler types can both name it.
 */
export interface ReadmodelHandle<T extends { readonly name: string } = { readonly name: string }> {
  readonly kind: "readmodelHandle";
  /** The name it is registered under (the eventHandlerName). */
  readonly name: string;
  /** The object given to `registerReadmodel`. */
  readonly readmodel: T;
}

/** True when `x` is a ReadmodelHandle. */
export function isReadmodelHandle(x: unknown): x is ReadmodelHandle {
  return typeof x === "object" && x !== null && (x as { kind?: unknown }).kind === "readmodelHandle";
}

/**
 * What names a registered readmodel in a lookup (`facade.readmodel`,
 * `ctx.readmodel`): its handle, the object itself (it must be the one
 * registered under its name), or its name.
 */
export type ReadmodelRef<T extends { readonly name: string } = { readonly name: string }> = ReadmodelHandle<T> | T | string;
