// Types of eslint.config.js for the tests that read it (test/unit/architecture-layout.test.ts).
/** Folder ranks under src/: imports point to lower ranks only. */
export declare const ranks: Readonly<Record<string, number>>;
declare const config: unknown[];
export default config;
