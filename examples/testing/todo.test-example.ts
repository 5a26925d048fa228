/**
 * docs/testing.md's examples: tests of the Todo domain's commands and of a
 * readmodel, written as a user writes them in a `*.test.ts` file (here inside
 * a function, so that test/project/docs-testing.unit.test.ts can run them).
 */
import type { Facade } from "mneme";
import { createTestFacade, scenario, testReqCtx } from "mneme/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CompleteTodo, CreateTodo, RenameTodo, TodoCreated, TodoRenamed, registerTodo } from "../todo/todo-domain.js";
import { TodoBoard } from "./todo-board.js";

export function todoCommandTests(): void {
  describe("Todo commands", () => {
    const todoUuid = "0190f5e4-8e4a-7cc4-9f4e-00000000a001";
    let facade: Facade;
    beforeEach(async () => {
      facade = await createTestFacade({ register: registerTodo }); // in-memory stores, started
    });
    afterEach(async () => {
      await facade.stop();
    });

    it("renames a todo", async () => {
      const [renamed] = await scenario(facade)
        .given([TodoCreated.create(todoUuid, { title: "Write docs" })])
        .when(RenameTodo, { todoUuid, title: "Write the testing docs" }, { reqCtx: testReqCtx })
        .then([TodoRenamed.create(todoUuid, { title: "Write the testing docs" })]);
      expect(renamed?.version).toBe(2); // the given event was version 1
      expect(renamed?.tenantUuid).toBe(testReqCtx.senderTenantUuid); // the given event took the command's tenant
    });

    it("appends nothing for the same title", async () => {
      await scenario(facade)
        .given([TodoCreated.create(todoUuid, { title: "Write docs" })])
        .when(RenameTodo, { todoUuid, title: "Write docs" }, { reqCtx: testReqCtx })
        .then([]);
    });

    it("completes a todo (expected events as plain objects)", async () => {
      await scenario(facade)
        .given([TodoCreated.create(todoUuid, { title: "Write docs" })])
        .when(CompleteTodo, { todoUuid }, { reqCtx: testReqCtx })
        .then([{ domain: "Todo", name: "TodoCompleted", payload: { completed: true } }]);
    });

    it("refuses errors with their code and appends nothing", async () => {
      await scenario(facade).when(CompleteTodo, { todoUuid }, { reqCtx: testReqCtx }).thenThrows("NOT_FOUND");
      await scenario(facade)
        .given([TodoCreated.create(todoUuid, { title: "Write docs" })])
        .when(CreateTodo, { todoUuid, title: "Again" }, { reqCtx: testReqCtx })
        .thenThrows("CONFLICT");
    });

    it("does not let one tenant touch another tenant's todo", async () => {
      await scenario(facade)
        .given([TodoCreated.create(todoUuid, { title: "Theirs" }, { tenantUuid: "another-tenant" })])
        .when(RenameTodo, { todoUuid, title: "Mine now" }, { reqCtx: testReqCtx })
        .thenThrows("NOT_FOUND");
    });

    it("refuses a command without a full request context", async () => {
      // CreateTodo has the default permission, authorized: it needs all four sender fields.
      await scenario(facade).when(CreateTodo, { todoUuid, title: "Anonymous" }).thenThrows("PERMISSION_DENIED");
    });
  });
}

export function todoBoardTests(): void {
  describe("TodoBoard readmodel", () => {
    const ids = ["0190f5e4-8e4a-7cc4-9f4e-00000000b001", "0190f5e4-8e4a-7cc4-9f4e-00000000b002", "0190f5e4-8e4a-7cc4-9f4e-00000000b003"];
    const tenant = testReqCtx.senderTenantUuid;

    it("lists a tenant's open todos by title, also after a restore from zero", async () => {
      const facade = await createTestFacade({ register: registerTodo, readmodels: (f) => [new TodoBoard(f)] });
      try {
        const reqCtx = testReqCtx;
        await facade.dispatch(CreateTodo, { todoUuid: ids[0]!, title: "Milk" }, { reqCtx, waitToFinish: true });
        await facade.dispatch(CreateTodo, { todoUuid: ids[1]!, title: "Bread" }, { reqCtx, waitToFinish: true });
        await facade.dispatch(CreateTodo, { todoUuid: ids[2]!, title: "Apples" }, { reqCtx, waitToFinish: true });
        await facade.dispatch(CompleteTodo, { todoUuid: ids[1]! }, { reqCtx, waitToFinish: true }); // readmodels have applied it

        const board = facade.readmodel<TodoBoard>("TodoBoard");
        const open = await board.openTodos(tenant);
        expect(open.items.map((t) => t.title)).toEqual(["Apples", "Milk"]);
        expect(open.total).toBe(2);
        expect(await board.openTodos("another-tenant")).toEqual({ items: [], total: 0 });

        await board.restoreState(undefined, { fromZero: true }).done; // rebuilt from the event store
        expect(await board.openTodos(tenant)).toEqual(open);
      } finally {
        await facade.stop();
      }
    });

    it("sees a scenario's given events and its command's events once then() resolves", async () => {
      const facade = await createTestFacade({ register: registerTodo, readmodels: (f) => [new TodoBoard(f)] });
      try {
        await scenario(facade)
          .given([TodoCreated.create(ids[0]!, { title: "Milk" }), TodoCreated.create(ids[1]!, { title: "Bread" })])
          .when(RenameTodo, { todoUuid: ids[1]!, title: "Rye bread" }, { reqCtx: testReqCtx })
          .then([TodoRenamed.create(ids[1]!, { title: "Rye bread" })]);
        const board = facade.readmodel<TodoBoard>("TodoBoard");
        expect(await board.titles(tenant, ids)).toEqual(
          new Map([
            [ids[0]!, "Milk"],
            [ids[1]!, "Rye bread"],
          ]),
        );
      } finally {
        await facade.stop();
      }
    });
  });
}
