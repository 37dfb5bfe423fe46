/**
 * Entry point of the `punctual` command (`bin/punctual.js` runs the compiled form).
 * Exit codes: 0 success, 1 the operation failed, 2 cannot start or bad usage
 * (see `./errors.ts`).
 */
import { CommanderError } from "commander";
import { EXIT_STARTUP, reportError } from "./errors.js";
import { buildProgram } from "./program.js";
import type { Io } from "./run.js";

// `punctual … | head`: a closed pipe ends the output quietly, as other commands do.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") process.exit(process.exitCode ?? 0);
    throw err;
  });
}

const io: Io = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
};

try {
  await buildProgram(io).parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // commander already printed its message (or the help / version).
    process.exitCode = err.exitCode === 0 ? 0 : EXIT_STARTUP;
  } else {
    process.exitCode = reportError(err, io.err);
  }
}
