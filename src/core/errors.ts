/**
 * @deprecated Moved to src/model/errors.ts. Kept only for src/cli until its
 * imports point at ../model/; then delete this file (and src/core/).
 */
export * from "../model/errors.js";
