import { describe, expect, it } from "vitest";
import { createTestFacade, scenario, testReqCtx } from "mneme/testing";
import {
  CompleteTodo,
  CreateTodo,
  RenameTodo,
  Todo,
  TodoCompleted,
  TodoCreated,
  TodoProjection,
  TodoRenamed,
  registerTodo,
} from "../../examples/todo/todo-domain.js";

const id = "0190f5e4-8e4a-7cc4-9f4e-000000000001";

describe("mneme/testing helpers", () => {
  it("createTestFacade starts a facade with domains and readmodels", async () => {
    const facade = await createTestFacade({ domains: [Todo], readmodels: (f) => [new TodoProjection(f)] });
    expect(facade.state).toBe("started");
    expect(facade.runtime.listEventHandlers().map((h) => h.eventHandlerName)).toEqual(["TodoProjection"]);
    await facade.stop();
  });

  it("scenario: given history, when a command, then its events", async () => {
    const facade = await createTestFacade({ register: registerTodo });
    await scenario(facade)
      .given([TodoCreated.create(id, { title: "a" })])
      .when(RenameTodo, { todoUuid: id, title: "b" }, { reqCtx: testReqCtx })
      .then([TodoRenamed.create(id, { title: "b" })]);
    await scenario(facade)
      .when(CompleteTodo, { todoUuid: id }, { reqCtx: testReqCtx })
      .then([TodoCompleted.create(id, { completed: true })]);
    await scenario(facade).when(CreateTodo, { todoUuid: id, title: "again" }, { reqCtx: testReqCtx }).thenThrows("CONFLICT");
    await expect(
      scenario(facade)
        .when(RenameTodo, { todoUuid: id, title: "c" }, { reqCtx: testReqCtx })
        .then([TodoRenamed.create(id, { title: "WRONG" })]),
    ).rejects.toThrow(/but the scenario expected/);
    await expect(
      scenario(facade).when(RenameTodo, { todoUuid: id, title: "d" }, { reqCtx: testReqCtx }).thenThrows("NOT_FOUND"),
    ).rejects.toThrow(/expected NOT_FOUND, but the command succeeded/);
    await facade.stop();
  });

  it("scenario: awaiting when(...) without then/thenThrows rejects at once with a clear error and runs nothing", async () => {
    const facade = await createTestFacade({ register: registerTodo });
    const step = scenario(facade)
      .given([TodoCreated.create(id, { title: "a" })])
      .when(RenameTodo, { todoUuid: id, title: "b" }, { reqCtx: testReqCtx });
    // What `await` does with a thenable: call then(resolve, reject). reject must be called, synchronously.
    const seen: { resolved?: unknown; rejected?: unknown } = {};
    (step.then as unknown as (ok: (v: unknown) => void, fail: (e: unknown) => void) => unknown)(
      (v) => (seen.resolved = v),
      (e) => (seen.rejected = e),
    );
    expect(seen.resolved).toBeUndefined();
    expect(String(seen.rejected)).toMatch(
      /awaited without an expectation, so nothing ran: finish it with \.then\(\[\.\.\.expected events\]\) or \.thenThrows\(code\)/,
    );
    // And a real await (TypeScript already rejects it: the `then` is not a promise's).
    // @ts-expect-error -- awaiting the step itself is the mistake under test
    await expect((async () => step)()).rejects.toThrow(/awaited without an expectation/);
    expect(await facade.eventRepository.headPosition(), "neither the given events nor the command ran").toBe(0);
    // The step is still usable afterwards.
    await step.then([TodoRenamed.create(id, { title: "b" })]);
    await facade.stop();
  });
});
