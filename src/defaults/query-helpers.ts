/** Small helpers shared by the built-in query handlers. */
import { MnemeError } from "../model/errors.js";
import type { ProjectionListOptions, ProjectionModel } from "../readmodel/projection-readmodel.js";

/** The options of a ProjectionReadmodel list from a list query's payload. */
export function listOptions(p: { page?: number; pageSize?: number; includeHistory?: boolean }, tenantUuid?: string): ProjectionListOptions {
  return {
    ...(tenantUuid === undefined ? {} : { tenantUuid }),
    ...(p.page === undefined ? {} : { page: p.page }),
    ...(p.pageSize === undefined ? {} : { pageSize: p.pageSize }),
    ...(p.includeHistory === true ? { includeHistory: true } : {}),
  };
}

/** The model, or NOT_FOUND: a Get query of something unknown is an error an HTTP adapter maps to 404. */
export function found<M>(model: ProjectionModel<M> | undefined, what: string): ProjectionModel<M> {
  if (model === undefined) throw new MnemeError("NOT_FOUND", `${what} does not exist`);
  return model;
}
