#!/usr/bin/env node
// The `punctual` command: runs the compiled CLI (dist/, built by `npm run build`; the
// published package ships it, so an install builds nothing).
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const main = new URL("../dist/cli/main.js", import.meta.url);
if (!existsSync(fileURLToPath(main))) {
  process.stderr.write("punctual: dist/ is missing; run `npm run build` first.\n");
  process.exit(1);
}
await import(main.href);
