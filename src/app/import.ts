/**
 * iCalendar import into the store (API-5, DEL-9, DEL-10): each VEVENT UID of a source is
 * one schedule (`source`, `externalId` = UID). Importing the same file again changes
 * nothing; an edited file updates the changed schedules (their waiting deliveries
 * realigned), and events gone from the file are cancelled. The changes are written in
 * chunks, each one transaction, under the source's import lock (see `./import/`).
 * Lenient with files: an event that fails strict validation is skipped with its UID and
 * reason while the rest import.
 */
import {
  dryRunDeliveriesAsync,
  parseCalendarAsync,
  type DryRunDelivery,
  type IcalImportOptions,
  type SkippedEvent,
} from "../ical/index.js";
import type { ImportOptions, ImportSummary } from "./import/index.js";
import type { Punctual } from "./punctual.js";

export {
  IMPORT_CHUNK,
  type ImportedScheduleResult,
  type ImportOptions,
  type ImportProgress,
  type ImportSummary,
} from "./import/index.js";

/**
 * Imports a calendar. Safe to repeat: the same file is a no-op. Imports of one (tenant,
 * source) run one at a time, across processes on PostgreSQL (an advisory lock, see
 * store/import-lock.ts): the reading runs outside the lock, the comparison and the
 * writes — in chunks of {@link IMPORT_CHUNK} changes, each one transaction — inside it.
 * Reading, validating and writing give the event loop a turn about every 10 ms (OPS-12),
 * so a large file does not hold up health checks or other requests.
 * @throws ValidationError when the file is not iCalendar at all or breaks a limit.
 */
export function importCalendar(
  punctual: Punctual,
  text: string,
  options: ImportOptions,
): Promise<ImportSummary> {
  return punctual.importCalendar(text, options);
}

/**
 * `--dry-run`: every delivery whose occurrence falls in [from, to), computed as the
 * scheduler would plan it with its clock at `from`. Touches no database. Runs in slices
 * with turns of the event loop between them, and refuses a window that may hold too many
 * deliveries before computing any (OPS-12).
 * @throws ValidationError when the file is not iCalendar at all or breaks a limit, or
 *   field `window` when the window may hold more than `MAX_DRY_RUN_DELIVERIES`.
 */
export async function dryRunImport(
  text: string,
  options: IcalImportOptions & {
    fromMs: number;
    toMs: number;
    yieldNow?: () => Promise<void>;
  },
): Promise<{
  deliveries: DryRunDelivery[];
  skipped: SkippedEvent[];
  warnings: string[];
  events: number;
  floatingTzid: string;
}> {
  const parsed = await parseCalendarAsync(text, options);
  return {
    deliveries: await dryRunDeliveriesAsync(
      parsed,
      { fromMs: options.fromMs, toMs: options.toMs },
      options.yieldNow,
    ),
    skipped: parsed.skipped,
    warnings: parsed.warnings,
    events: parsed.events.length,
    floatingTzid: parsed.floatingTzid,
  };
}
