/**
 * The mneme facade as a Nest provider: created and started when the module
 * initialises, stopped when the application shuts down (after the HTTP server
 * has closed, so no request is cut off by a stopped facade).
 */
import type { IncomingHttpHeaders } from "node:http";
import { Injectable, type OnApplicationShutdown, type OnModuleInit } from "@nestjs/common";
import { type Facade, MnemeError, type RequestContext } from "mneme";
import { accountRoutes, parseSessionToken, resolveCredentials } from "mneme/defaults";
import { type NodeListener, createHttpHandler, toNodeListener } from "mneme/http";
import { startDemoFacade } from "../http-common/demo-app.js";

/** Where the mneme HTTP handler is mounted (its `basePath`). */
export const MNEME_BASE_PATH = "/mneme";

@Injectable()
export class MnemeService implements OnModuleInit, OnApplicationShutdown {
  #facade: Facade | undefined;
  #listener: NodeListener | undefined;
  systemTenantUuid = "";

  async onModuleInit(): Promise<void> {
    // The demo's facade, as every HTTP example has it: the Todo domain and the built-in domains
    // (accounts, sessions, tenants), in memory or in SQLite (MNEME_DB); created and started here.
    const { facade, systemTenantUuid } = await startDemoFacade("todo-nest");
    this.#facade = facade;
    this.systemTenantUuid = systemTenantUuid;
    this.#listener = toNodeListener(createHttpHandler(facade, { basePath: MNEME_BASE_PATH, modules: [accountRoutes()] }));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.#facade?.stop();
    this.#facade = undefined;
    console.log("mneme stopped");
  }

  get facade(): Facade {
    if (this.#facade === undefined) throw new MnemeError("NOT_STARTED", "the mneme module has not been initialised");
    return this.#facade;
  }

  /** The mneme HTTP handler on node's request and response (Express hands them over as they are). */
  get listener(): NodeListener {
    if (this.#listener === undefined) throw new MnemeError("NOT_STARTED", "the mneme module has not been initialised");
    return this.#listener;
  }

  /**
   * The request context of a caller, from the same credentials the mneme HTTP
   * handler reads: `Authorization: Bearer <token>` of a login and
   * `X-Identity-Uuid` (the identity, and so the tenant, to act as).
   * No or unusable credentials: UNAUTHENTICATED (401).
   */
  async requestContext(headers: IncomingHttpHeaders): Promise<RequestContext> {
    const bearer = /^\s*Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? "");
    const token = parseSessionToken(bearer?.[1]);
    const identity = headers["x-identity-uuid"];
    const reqCtx =
      token === undefined
        ? undefined
        : await resolveCredentials(this.facade, { ...token, ...(typeof identity === "string" ? { identityUuid: identity } : {}) });
    if (reqCtx === undefined)
      throw new MnemeError("UNAUTHENTICATED", "log in (POST /mneme/api/sessions) and send `Authorization: Bearer <token>`");
    return reqCtx;
  }
}
