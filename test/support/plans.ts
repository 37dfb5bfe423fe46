/**
 * Reading query plans in tests: EXPLAIN (FORMAT JSON) on either engine, walked as a tree.
 * Assertions are on the plan's shape (which nodes, which indexes) or on row counts an
 * EXPLAIN ANALYZE reports — never on time.
 */
import type { Queryable } from "../../src/store/database.js";

/** One node of an EXPLAIN (FORMAT JSON) plan (the fields the tests read). */
export interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Subplan Name"?: string;
  "CTE Name"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  "Rows Removed by Filter"?: number;
  Plans?: PlanNode[];
}

/** The plan of `sql` with `params` (EXPLAIN options such as `ANALYZE` may be added). */
export async function explain(
  db: Queryable,
  sql: string,
  params: readonly unknown[],
  options = "",
): Promise<PlanNode> {
  const { rows } = await db.query<Record<string, unknown>>(
    `explain (format json${options ? `, ${options}` : ""}) ${sql}`,
    params,
  );
  let value = Object.values(rows[0] ?? {})[0];
  if (typeof value === "string") value = JSON.parse(value);
  const plan = (value as Array<{ Plan: PlanNode }>)[0]?.Plan;
  if (!plan) throw new Error(`no plan in ${JSON.stringify(rows)}`);
  return plan;
}

/** Every node of the tree, depth first. */
export function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** The subtree of the CTE `name` (`CTE due`), or throws. */
export function cte(plan: PlanNode, name: string): PlanNode {
  const found = nodes(plan).find((n) => n["Subplan Name"] === `CTE ${name}`);
  if (!found) throw new Error(`no CTE ${name} in the plan:\n${outline(plan)}`);
  return found;
}

/** A one-line-per-node outline, for failure messages. */
export function outline(plan: PlanNode, depth = 0): string {
  const label = [
    plan["Node Type"],
    plan["Index Name"] ? `using ${plan["Index Name"]}` : "",
    plan["Relation Name"] ? `on ${plan["Relation Name"]}` : "",
    plan["Subplan Name"] ? `(${plan["Subplan Name"]})` : "",
  ]
    .filter(Boolean)
    .join(" ");
  return [
    `${"  ".repeat(depth)}${label}`,
    ...(plan.Plans ?? []).map((p) => outline(p, depth + 1)),
  ].join("\n");
}

/** Node types that join two inputs. */
export const JOIN_NODES = ["Nested Loop", "Hash Join", "Merge Join"];

/** Scans of `relation` that read the table itself rather than an index. */
export function tableScans(plan: PlanNode, relation: string): PlanNode[] {
  return nodes(plan).filter(
    (n) =>
      n["Relation Name"] === relation &&
      (n["Node Type"] === "Seq Scan" || n["Node Type"] === "Tid Range Scan"),
  );
}
