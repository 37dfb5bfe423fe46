#!/usr/bin/env node
// Part of `npm run build`: copies the dashboard's page, script and style sheet
// (src/dashboard/assets/, served as they are: no bundling) next to the compiled server
// code, in dist/dashboard/assets/, so the packed package serves /ui without a build step.
import { cpSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
cpSync(join(root, "src", "dashboard", "assets"), join(root, "dist", "dashboard", "assets"), {
  recursive: true,
});
