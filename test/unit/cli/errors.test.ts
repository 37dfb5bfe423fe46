/** API-3: how the CLI reports a refused request. */
import { describe, expect, it } from "vitest";
import { ApiError, EXIT_FAILURE, reportError } from "../../../src/cli/errors.js";
import { ResourceBusyError } from "../../../src/errors/index.js";

function report(err: unknown): { code: number; text: string } {
  let text = "";
  const code = reportError(err, (s) => (text += s));
  return { code, text };
}

describe("CLI error reports", () => {
  it("API-3: a 401 names PUNCTUAL_API_KEY, the variable the CLI reads the key from", () => {
    const r = report(
      new ApiError(401, {
        error: {
          code: "UNAUTHORIZED",
          message: "Send the API key as `Authorization: Bearer <key>`.",
        },
      }),
    );
    expect(r.code).toBe(EXIT_FAILURE);
    expect(r.text).toContain("(401 UNAUTHORIZED)");
    expect(r.text).toContain("PUNCTUAL_API_KEY");
  });

  it("API-3: another refusal adds no key hint", () => {
    const r = report(
      new ApiError(404, { error: { code: "NOT_FOUND", message: "No such schedule." } }),
    );
    expect(r.text).toBe("punctual: No such schedule. (404 NOT_FOUND)\n");
  });

  it("OPS-8: a 503 RESOURCE_BUSY prints the server's message and says to run the command again", () => {
    const r = report(
      new ApiError(503, {
        error: {
          code: "RESOURCE_BUSY",
          message:
            "POST /v1/schedules/s1/pause: a row of punctual_schedules is held by another transaction and was not released within 5000 ms; nothing was changed, try again later",
          resource: "/v1/schedules/s1/pause",
        },
      }),
    );
    expect(r.code).toBe(EXIT_FAILURE);
    expect(r.text).toContain("(503 RESOURCE_BUSY)");
    expect(r.text).toContain("nothing was changed");
    expect(r.text).toContain("run the command again in a few seconds");
  });

  it("OPS-8: a lock timeout of a command on the database itself reads the same", () => {
    const r = report(new ResourceBusyError("punctual_schedules", 5_000));
    expect(r.code).toBe(EXIT_FAILURE);
    expect(r.text).toContain(
      "punctual: a row of punctual_schedules is held by another transaction",
    );
    expect(r.text).toContain("run the command again in a few seconds");
  });
});
