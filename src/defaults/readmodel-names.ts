import { isMnemeError, MnemeError } from "../model/errors.js";
import type { FacadeHandle } from "../model/facade-handle.js";

/** Names of the built-in readmodels (each is registered once per facade by registerDefaults). */
export const READMODELS = Object.freeze({
  tenant: "TenantProjection",
  account: "AccountProjection",
  session: "SessionProjection",
  identity: "IdentityProjection",
  group: "GroupProjection",
  authIndex: "AuthIndex",
});

/**
 * A built-in readmodel of `facade`, by name: what code that has only the facade
 * (credentials, the sender check, permission functions) reads the built-in
 * domains' state through. INVALID_STATE when registerDefaults was not called on it.
 */
export function builtInReadmodel<T extends { readonly name: string }>(facade: FacadeHandle, name: string): T {
  try {
    return facade.readmodel<T>(name);
  } catch (e) {
    if (isMnemeError(e, "UNKNOWN_EVENT_HANDLER")) {
      throw new MnemeError("INVALID_STATE", "the built-in domains are not registered on this facade: call registerDefaults(facade, { admin }) before facade.start()", { cause: e });
    }
    throw e;
  }
}
