/** Answers a MnemeError as the mneme HTTP handler does: a problem body with the status of its code. */
import { type ArgumentsHost, Catch, type ExceptionFilter } from "@nestjs/common";
import type { Response } from "express";
import { MnemeError } from "mneme";
import { statusOf } from "mneme/http";

@Catch(MnemeError)
export class MnemeErrorFilter implements ExceptionFilter<MnemeError> {
  catch(error: MnemeError, host: ArgumentsHost): void {
    const status = statusOf(error.code);
    const body = { type: `urn:mneme:error:${error.code}`, status, code: error.code, detail: error.message, errors: error.details };
    const res = host.switchToHttp().getResponse<Response>();
    if (status === 401) res.setHeader("WWW-Authenticate", "Bearer");
    res.status(status).type("application/problem+json").json(body);
  }
}
