/**
 * The Todo domain behind Nest routes: each handler builds the caller's request
 * context from the request and dispatches or queries through the facade, so
 * mneme's permission check and payload validation run as on mneme's own routes.
 */
import type { IncomingHttpHeaders } from "node:http";
import { Body, Controller, Get, Headers, HttpCode, Inject, NotFoundException, Param, Post, Query } from "@nestjs/common";
import { newUuid } from "mneme";
import { CompleteTodo, CreateTodo, GetTodo, ListTodos } from "../todo/todo-domain.js";
import { MnemeService } from "./mneme.service.js";

@Controller("todos")
export class TodosController {
  // An explicit token: tsx (esbuild) emits no decorator metadata for Nest to read the parameter's type from.
  constructor(@Inject(MnemeService) private readonly mneme: MnemeService) {}

  /** POST /todos `{ title }`: 201 `{ todoUuid, commandUuid }` once the projection has it. */
  @Post()
  async create(@Headers() headers: IncomingHttpHeaders, @Body() body: { title?: string } | undefined) {
    const reqCtx = await this.mneme.requestContext(headers);
    const todoUuid = newUuid();
    // The payload is validated by CreateTodo's schema: a missing or empty title is 400 VALIDATION_FAILED.
    const { commandUuid } = await this.mneme.facade.dispatch(
      CreateTodo,
      { todoUuid, title: body?.title as string },
      { reqCtx, waitToFinish: true },
    );
    return { todoUuid, commandUuid };
  }

  /** POST /todos/:todoUuid/complete: 204. */
  @Post(":todoUuid/complete")
  @HttpCode(204)
  async complete(@Headers() headers: IncomingHttpHeaders, @Param("todoUuid") todoUuid: string): Promise<void> {
    const reqCtx = await this.mneme.requestContext(headers);
    await this.mneme.facade.dispatch(CompleteTodo, { todoUuid }, { reqCtx, waitToFinish: true });
  }

  /** GET /todos/:todoUuid?history=true: the todo of the caller's tenant, or 404. */
  @Get(":todoUuid")
  async get(@Headers() headers: IncomingHttpHeaders, @Param("todoUuid") todoUuid: string, @Query("history") history?: string) {
    const reqCtx = await this.mneme.requestContext(headers);
    const todo = await this.mneme.facade.query(GetTodo, { todoUuid, includeHistory: history === "true" }, { reqCtx });
    if (todo === undefined) throw new NotFoundException(`no todo ${todoUuid}`);
    return todo;
  }

  /** GET /todos?page=1&pageSize=50: a page of the caller's tenant's todos. */
  @Get()
  async list(@Headers() headers: IncomingHttpHeaders, @Query("page") page = "1", @Query("pageSize") pageSize = "50") {
    const reqCtx = await this.mneme.requestContext(headers);
    return this.mneme.facade.query(ListTodos, { page: Number(page), pageSize: Number(pageSize) }, { reqCtx });
  }
}
