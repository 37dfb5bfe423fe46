#!/usr/bin/env node
// Part of `npm run build`: copies the dashboard's page, script and style sheet
// (src/dashboard/assets/, served as they are: no bundling) next to the compiled server
// code, in dist/dashboard/assets/, so the packed package serves /ui without a build step.
//
// CLI: node scripts/copy-assets.mjs [outDir]   (outDir: the compiled tree, default dist/)
import { cpSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const outDir = process.argv[2] ? resolve(process.argv[2]) : join(root, "dist");
cpSync(join(root, "src", "dashboard", "assets"), join(outDir, "dashboard", "assets"), {
  recursive: true,
});
