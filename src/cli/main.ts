/**
 * Entry point of the `punctual` command (`bin/punctual.js` runs the compiled form).
 * Exit codes: 0 success, 1 the operation failed, 2 cannot start or bad usage
 * (see `./errors.ts`).
 */
import { CommanderError } from "commander";
import { EXIT_STARTUP, reportError } from "./errors.js";
import { buildProgram } from "./program.js";
import { isServing, type Io } from "./run.js";

// `punctual … | head`: a closed pipe ends a command's output quietly, as other commands
// do. A running server (`start`, `worker`) is not ended by it: under
// `punctual start 2>&1 | tee log`, Ctrl-C signals the whole group, tee may be gone first,
// and the shutdown's own lines then meet a closed pipe; exiting there skipped the clean
// shutdown (claims kept, the instance left running until it went stale). The server
// goes on without that output: its stop still runs to the end (OPS-6).
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    const closed = err.code === "EPIPE" || err.code === "ERR_STREAM_DESTROYED";
    if (closed && isServing()) return;
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
