/** OPS-7: task definitions: cadence forms, validation errors naming entry and field, rrule tasks. */
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/errors/index.js";
import { parseEvery, validateTasks } from "../../../src/scheduler/tasks.js";

describe("OPS-7 definitions", () => {
  it("OPS-7: every takes ms or a period text; bad definitions are a ConfigError naming entry and field", () => {
    expect(parseEvery("15m")).toBe(900_000);
    expect(parseEvery(30_000)).toBe(30_000);
    expect(parseEvery("1d")).toBe(86_400_000);
    const run = () => undefined;
    let err: unknown = null;
    try {
      validateTasks([
        { name: "a", every: "15m", budgetMs: 1_000, run },
        { name: "a", every: "soon", budgetMs: 0, run },
        { name: "c", rrule: "FREQ=SOMETIMES", budgetMs: 1_000, run },
        { name: "d", budgetMs: 1_000, run },
      ]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    expect(message).toContain('tasks.1.name: duplicate task name "a"');
    expect(message).toContain("tasks.1.budgetMs");
    expect(message).toContain("tasks.1.every");
    expect(message).toContain("tasks.2.rrule");
    expect(message).toContain("tasks.3.every: give exactly one of every or rrule");
  });

  it("OPS-7: an rrule task runs at the rule's occurrences in its zone", () => {
    const [task] = validateTasks([
      {
        name: "r",
        rrule: "FREQ=DAILY;BYHOUR=3",
        tzid: "Europe/Berlin",
        budgetMs: 1,
        run: () => {},
      },
    ]);
    expect(new Date(task!.next(Date.parse("2027-01-04T08:00:00Z"))!).toISOString()).toBe(
      "2027-01-05T02:00:00.000Z",
    );
    expect(new Date(task!.next(Date.parse("2027-07-04T08:00:00Z"))!).toISOString()).toBe(
      "2027-07-05T01:00:00.000Z",
    );
  });
});
