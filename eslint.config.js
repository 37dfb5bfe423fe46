// Lint: typescript-eslint rules plus the import-direction rule of docs/architecture.md.
// A module may import only from folders of a lower rank (and from its own folder).
import tseslint from "typescript-eslint";
import importX from "eslint-plugin-import-x";

/** Folder ranks under src/ (docs/architecture.md, "Layout"; test/unit/architecture-layout.test.ts). */
export const ranks = {
  domain: 0,
  clock: 0,
  errors: 1,
  observability: 1,
  config: 2,
  recurrence: 2,
  channels: 2,
  contracts: 2,
  definition: 3,
  store: 4,
  scheduler: 5,
  ical: 5,
  app: 6,
  offload: 6,
  api: 7,
  cli: 8,
  dashboard: 7,
  testing: 7,
};

const zones = [];
for (const [target, rank] of Object.entries(ranks)) {
  for (const [from, fromRank] of Object.entries(ranks)) {
    if (from !== target && fromRank >= rank) {
      zones.push({
        target: `./src/${target}`,
        from: `./src/${from}`,
        message: `src/${target} (rank ${rank}) must not import src/${from} (rank ${fromRank}): imports point to lower ranks only.`,
      });
    }
  }
}

/**
 * Every write to the delivery tables lives in src/store/deliveries/ (docs/architecture.md,
 * "Store"): a string or template text anywhere else in src/ that inserts into, updates,
 * deletes from or truncates `punctual_deliveries`, `punctual_queue` (migration 0050) or
 * `punctual_attempts` is refused.
 * Statements of other store modules compose the delivery part from that folder's helpers
 * (`syncWaitingSql`, `cancelWaitingSql`, …), whose text the rule does not see.
 * test/unit/lint-delivery-writes.test.ts proves it fires.
 */
const DELIVERY_WRITE =
  "/(insert\\s+into|update|delete\\s+from|truncate(\\s+table)?)\\s+(only\\s+)?punctual_(deliveries|attempts|queue)\\b/i";
const deliveryWrites = [
  `TemplateElement[value.raw=${DELIVERY_WRITE}]`,
  `Literal[value=${DELIVERY_WRITE}]`,
].map((selector) => ({
  selector,
  message:
    "Writes to punctual_deliveries / punctual_queue / punctual_attempts live in src/store/deliveries/ only: add or reuse a statement there and call it.",
}));
/** The database-clock expression is defined once: `NOW` of src/store/deliveries/sql.ts. */
const nowCopies = [
  "TemplateElement[value.raw=/coalesce\\(\\$1::timestamptz,\\s*now\\(\\)\\)/i]",
  "Literal[value=/coalesce\\(\\$1::timestamptz,\\s*now\\(\\)\\)/i]",
].map((selector) => ({
  selector,
  message:
    'The "now" expression is defined once: import NOW (or msAfterNow / msBeforeNow) from src/store/deliveries/sql.ts.',
}));
const noQuery = {
  selector: "CallExpression[callee.property.name='query']",
  message:
    "No .query( outside src/store/: add a typed function (parameters object, declared row type, TSDoc naming the statement and the requirement) in src/store/ and call it.",
};

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "coverage/**", "punctual-data/**", ".test-tmp/**"] },
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    plugins: { "import-x": importX },
    settings: { "import-x/resolver": { typescript: { project: "./tsconfig.json" } } },
    rules: {
      "import-x/no-restricted-paths": ["error", { zones }],
      "import-x/no-cycle": ["error", { ignoreExternal: true }],
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_" },
      ],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
  {
    files: ["src/index.ts"],
    rules: { "import-x/no-restricted-paths": "off" },
  },
  {
    // All SQL has one home (docs/architecture.md, decision 2): outside src/store/ a module
    // calls the store's typed functions, never `.query(` itself. Tests, bench and scripts
    // are exempt (they probe statements directly).
    files: ["src/**/*.ts"],
    ignores: ["src/store/**"],
    rules: { "no-restricted-syntax": ["error", noQuery, ...deliveryWrites, ...nowCopies] },
  },
  {
    // Inside the store, the delivery tables are written by src/store/deliveries/ only, and
    // "now" is spelled once, in its sql.ts.
    files: ["src/store/**/*.ts"],
    ignores: ["src/store/deliveries/**"],
    rules: { "no-restricted-syntax": ["error", ...deliveryWrites, ...nowCopies] },
  },
  {
    files: ["src/store/deliveries/**/*.ts"],
    ignores: ["src/store/deliveries/sql.ts"],
    rules: { "no-restricted-syntax": ["error", ...nowCopies] },
  },
);
