/**
 * Commands computed in this process, with no server: `preview` (REC-7) and `validate`
 * (REC-3, strict posture). Both use exactly the recurrence code the scheduler uses.
 */
import { ValidationError } from "../errors/index.js";
import { preview, validateRule, type PreviewInput } from "../recurrence/index.js";
import { CliError, EXIT_FAILURE } from "./errors.js";
import { jsonText, table } from "./format.js";
import type { Io } from "./run.js";

/** `preview` flags. */
export interface PreviewFlags {
  dtstart: string;
  tzid: string;
  rrule?: string;
  rdate: string[];
  exdate: string[];
  after?: string;
  before?: string;
  count?: number;
  /** REC-2: the DST policy, as a schedule's `dst` (defaults: shift, earlier). */
  dstGap?: "shift" | "skip";
  dstOverlap?: "earlier" | "later";
  json?: boolean;
}

function invalid(err: ValidationError): CliError {
  return new CliError("invalid recurrence", EXIT_FAILURE, err.issues);
}

/** `punctual preview`: prints the next occurrences (table, or the JSON array). */
export function runPreview(flags: PreviewFlags, io: Io): void {
  const input: PreviewInput = {
    dtstart: flags.dtstart,
    tzid: flags.tzid,
    rrule: flags.rrule ?? null,
    rdate: flags.rdate,
    exdate: flags.exdate,
    after: flags.after ?? null,
    before: flags.before ?? null,
    ...(flags.count !== undefined ? { count: flags.count } : {}),
    ...(flags.dstGap !== undefined || flags.dstOverlap !== undefined
      ? {
          dst: {
            ...(flags.dstGap !== undefined ? { gap: flags.dstGap } : {}),
            ...(flags.dstOverlap !== undefined ? { overlap: flags.dstOverlap } : {}),
          },
        }
      : {}),
  };
  let items;
  try {
    items = preview(input);
  } catch (err) {
    if (err instanceof ValidationError) throw invalid(err);
    throw err;
  }
  if (flags.json) return io.out(jsonText(items));
  const rows = items.map((item, i) => ({ n: i + 1, ...item }));
  io.out(
    table(rows, [
      { header: "#", cell: (i) => i.n },
      { header: `LOCAL (${flags.tzid})`, cell: (i) => i.local },
      { header: "INSTANT (UTC)", cell: (i) => i.instant },
    ]),
  );
}

/** DTSTART used by `validate` when none is given: the start of the current UTC minute. */
function nowAsDtstart(): string {
  return new Date().toISOString().slice(0, 16) + ":00";
}

/** `punctual validate`: prints "valid" or throws a CliError naming the bad part. */
export function runValidate(
  flags: { rrule: string; dtstart?: string; tzid: string; json?: boolean },
  io: Io,
): void {
  try {
    const rec = validateRule({
      dtstart: flags.dtstart ?? nowAsDtstart(),
      tzid: flags.tzid,
      rrule: flags.rrule,
    });
    if (flags.json) io.out(jsonText({ valid: true, bounded: rec.ruleBounded }));
    else io.out("valid\n");
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    if (flags.json) {
      io.out(jsonText({ valid: false, issues: err.issues }));
      throw new CliError("invalid rule", EXIT_FAILURE);
    }
    throw new CliError("invalid rule", EXIT_FAILURE, err.issues);
  }
}
