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
  accountEraser: "AccountEraser",
});

/**
 * Rejects with INVALID_STATE unless registerDefaults was called on `facade`:
 * code that has only the facade (credentials, the sender check, permission
 * functions) reads the built-in domains' state through its readmodels.
 */
export function requireDefaults(facade: FacadeHandle): void {
  try {
    facade.readmodel(READMODELS.session);
  } catch (e) {
    if (isMnemeError(e, "UNKNOWN_EVENT_HANDLER")) {
      throw new MnemeError(
        "INVALID_STATE",
        "the built-in domains are not registered on this facade: call registerDefaults(facade, { admin }) before facade.start()",
        { cause: e },
      );
    }
    throw e;
  }
}
