/**
 * The lint rule of eslint.config.js that keeps every write of the delivery tables in
 * src/store/deliveries/ (docs/architecture.md, "Store"), and the one spelling of "now":
 * the same text is refused in another module and accepted in that folder.
 */
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

const eslint = new ESLint();

/** The messages of the rule `no-restricted-syntax` for `code` linted as file `path`. */
async function restricted(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path });
  return (result?.messages ?? [])
    .filter((m) => m.ruleId === "no-restricted-syntax")
    .map((m) => m.message);
}

const WRITES = [
  "export const X_SQL = `update punctual_deliveries d set late = true where d.id = $2`;",
  "export const X_SQL = `\n  insert into punctual_attempts (delivery_id) values ($1)`;",
  'export const X_SQL = "DELETE FROM punctual_deliveries where id = $1";',
  "const T = 'x'; export const X_SQL = `with a as (select 1) update   punctual_deliveries set state = ${T}`;",
];

describe("lint: writes of the delivery tables live in src/store/deliveries/", () => {
  for (const code of WRITES) {
    it(`DEL-2: refused outside the folder: ${code.slice(0, 60).replace(/\n/g, " ")}`, async () => {
      for (const path of ["src/store/schedules.ts", "src/app/deliveries.ts"]) {
        const messages = await restricted(path, code);
        expect(
          messages.some((m) => m.includes("src/store/deliveries/ only")),
          path,
        ).toBe(true);
      }
      expect(await restricted("src/store/deliveries/planning.ts", code)).toEqual([]);
    });
  }

  it("DEL-2: reads and writes of other tables are not refused", async () => {
    const code = [
      "export const A_SQL = `select d.id from punctual_deliveries d where d.state = 'sent'`;",
      "export const B_SQL = `update punctual_schedules set state = 'paused' where id = $2`;",
      "export const C_SQL = `select * from punctual_delivery_attempts where delivery_id = $1`;",
    ].join("\n");
    expect(await restricted("src/store/schedules.ts", code)).toEqual([]);
  });

  it('OPS-9: the "now" expression is spelled once, in src/store/deliveries/sql.ts', async () => {
    const code = 'const NOW = "coalesce($1::timestamptz, now())"; export const N = NOW;';
    expect(await restricted("src/store/kinds.ts", code)).toHaveLength(1);
    expect(await restricted("src/store/deliveries/claim.ts", code)).toHaveLength(1);
    expect(await restricted("src/store/deliveries/sql.ts", code)).toEqual([]);
  });
});
