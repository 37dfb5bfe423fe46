/**
 * OPS-10: every migration file says what it does to the schema's readers, and the
 * compatibility window follows from what they say.
 */
import { describe, expect, it } from "vitest";
import {
  expectedVersion,
  loadMigrations,
  parseMigrationHeaders,
  schemaState,
} from "../../../src/store/migrator.js";

const migrations = loadMigrations();

describe("migration headers", () => {
  it("OPS-10: every file in migrations/ has a `-- kind:` and a `-- min_reader_version:` header", () => {
    const missing = migrations
      .filter((m) => m.kind === undefined || m.minReaderVersion === undefined)
      .map((m) => `${String(m.version).padStart(4, "0")}_${m.name}.sql`);
    expect(missing, "add `-- kind: expand|contract` and `-- min_reader_version: N`").toEqual([]);
  });

  it("OPS-10: min_reader_version never exceeds the file's own version, never goes down, and an expand migration keeps the previous value", () => {
    let previous = 0;
    const problems: string[] = [];
    for (const m of migrations) {
      const min = m.minReaderVersion ?? m.version;
      const file = `${m.version}_${m.name}`;
      if (min > m.version) problems.push(`${file}: min_reader_version ${min} > ${m.version}`);
      if (min < previous)
        problems.push(`${file}: min_reader_version ${min} < previous ${previous}`);
      if (m.kind === "expand" && previous > 0 && min !== previous) {
        problems.push(`${file}: an expand migration keeps min_reader_version ${previous}`);
      }
      previous = min;
    }
    expect(problems).toEqual([]);
  });

  it("OPS-10: headers are read from comment lines; a malformed one throws naming the file", () => {
    expect(
      parseMigrationHeaders("-- 0009 x\n-- kind: contract\n-- min_reader_version: 8\nselect 1;"),
    ).toEqual({
      kind: "contract",
      minReaderVersion: 8,
    });
    expect(parseMigrationHeaders("select 1;")).toEqual({});
    expect(() => parseMigrationHeaders("-- kind: shrink\n", "0009_x.sql")).toThrow(
      /0009_x\.sql.*expand or contract/,
    );
    expect(() => parseMigrationHeaders("-- min_reader_version: soon\n", "0009_x.sql")).toThrow(
      /0009_x\.sql/,
    );
  });

  it("OPS-10: a release runs on its own schema and on a newer one whose min_reader_version it meets; an older schema is migrated", () => {
    const r = expectedVersion(migrations);
    expect(schemaState(r, r, null)).toBe("current");
    expect(schemaState(r - 1, r, null)).toBe("behind");
    expect(schemaState(r + 3, r, r)).toBe("ahead-compatible");
    expect(schemaState(r + 3, r, r - 1)).toBe("ahead-compatible");
    expect(schemaState(r + 3, r, r + 1)).toBe("ahead-incompatible");
    // A newer schema that records nothing (unknown migrator) is refused.
    expect(schemaState(r + 1, r, null)).toBe("ahead-incompatible");
  });
});
