/** API-3: how the CLI reports a refused request. */
import { describe, expect, it } from "vitest";
import { ApiError, EXIT_FAILURE, reportError } from "../../../src/cli/errors.js";

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
});
