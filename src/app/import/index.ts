/**
 * Calendar import as a service (API-5): read, compare with what the source stored, write
 * the changes in chunks under the source's import lock. See `service.ts`.
 */
export { runImport, startImport, type ImportHandle } from "./service.js";
export { planImport, type ImportChange, type ImportPlan } from "./plan.js";
export { applyChanges, IMPORT_BATCH } from "./apply.js";
export {
  IMPORT_CHUNK,
  IMPORT_CHUNK_EMBEDDED,
  type ImportedScheduleResult,
  type ImportOptions,
  type ImportProgress,
  type ImportSummary,
} from "./types.js";
