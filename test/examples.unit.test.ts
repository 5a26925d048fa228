import { describe, expect, it } from "vitest";
import { main as readmodelExample } from "../examples/readmodels/open-todos.js";

describe("examples/readmodels (docs/readmodels.md)", () => {
  it("counts open todos, restores to the same count, and serves history", async () => {
    const r = await readmodelExample();
    expect(r).toEqual({
      open: 2,
      afterRestore: 2,
      replayed: 4,
      history: ["1:TodoCreated by i", "2:TodoCompleted by i"],
    });
  });
});
