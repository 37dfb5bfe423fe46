/**
 * `punctual recipients import FILE` (API-10): the rows of a CSV, NDJSON or JSON array file,
 * read as a stream and sent to `POST /v1/recipients:bulk` in chunks of the route's size
 * ({@link MAX_BULK_RECIPIENTS}), each row numbered by its line in the file (1-based, the
 * CSV header counted) so a refused row is found where it is.
 *
 * CSV (RFC 4180, parsed by csv-parse; a UTF-8 BOM is skipped, blank lines ignored): the
 * first line names the columns, each one of
 *   - `id` (required), `tzid` (required): the recipient's id and IANA zone;
 *   - `targets.<channel>.<field>`: a target field, e.g. `targets.email.to`,
 *     `targets.webhook.url`, `targets.slack.url`, `targets.discord.url`;
 *   - `attributes.<name>`: an attribute (text), e.g. `attributes.plan`;
 *   - `preferences`: the whole preferences object as JSON (`{"optOut":{…}}`);
 *   - `preferences.optOut.channels`, `preferences.optOut.categories`: opt-out lists,
 *     values separated by `;` (taken over `preferences`' own lists).
 * An empty cell leaves the field out. A column of any other name refuses the file (nothing
 * sent); a row whose cells cannot be read (a field count that is not the header's, JSON
 * that does not parse) is refused on its own, naming its line and column, and the others
 * are sent.
 */
import { closeSync, createReadStream, openSync, readFileSync, statSync } from "node:fs";
import { createInterface } from "node:readline";
import { parse } from "csv-parse";
import { MAX_BULK_RECIPIENTS } from "../contracts/recipients.js";
import { CliError, EXIT_FAILURE, EXIT_USAGE, unreadableFile } from "./errors.js";

/** A chunk of rows for one bulk request, with the file line of each row. */
export interface ImportChunk {
  /** The request body and its media type. */
  text: string;
  contentType: "application/x-ndjson" | "application/json";
  /** `lines[i]`: the file line (1-based) of the body's row `i`; for a JSON array, its item number. */
  lines: number[];
}

/** A row refused before it was sent (CSV: its cells could not be read). */
export interface LocalRowError {
  line: number;
  id: string | null;
  column: string | null;
  message: string;
}

/** What the import reads: chunks to send, and rows refused on reading. */
export type ImportItem = { chunk: ImportChunk } | { error: LocalRowError };

const TARGET_COLUMN = /^targets\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)$/;
const ATTRIBUTE_COLUMN = /^attributes\.(.+)$/;
const LIST_COLUMNS = new Set(["preferences.optOut.channels", "preferences.optOut.categories"]);

/**
 * Checks a CSV header: every column known, `id` and `tzid` present, none twice.
 * @throws CliError (usage) naming the column.
 */
export function checkCsvHeader(header: readonly string[]): void {
  const seen = new Set<string>();
  header.forEach((name, i) => {
    const known =
      name === "id" ||
      name === "tzid" ||
      name === "preferences" ||
      LIST_COLUMNS.has(name) ||
      TARGET_COLUMN.test(name) ||
      ATTRIBUTE_COLUMN.test(name);
    if (!known) {
      throw new CliError(
        `line 1, column ${i + 1} "${name}": not a recipient column (id, tzid, targets.<channel>.<field>, attributes.<name>, preferences, preferences.optOut.channels, preferences.optOut.categories)`,
        EXIT_USAGE,
      );
    }
    if (seen.has(name)) {
      throw new CliError(`line 1, column ${i + 1} "${name}": named twice`, EXIT_USAGE);
    }
    seen.add(name);
  });
  for (const required of ["id", "tzid"]) {
    if (!seen.has(required)) {
      throw new CliError(`line 1: the header has no "${required}" column`, EXIT_USAGE);
    }
  }
}

/**
 * The recipient body of one CSV record under `header` (checked by {@link checkCsvHeader}),
 * or the reason it cannot be read, naming the column.
 */
export function recipientOfCsvRecord(
  header: readonly string[],
  record: readonly string[],
): { value: Record<string, unknown> } | { column: string | null; message: string } {
  if (record.length !== header.length) {
    return {
      column: null,
      message: `has ${record.length} fields; the header has ${header.length}`,
    };
  }
  const value: Record<string, unknown> = {};
  const targets: Record<string, Record<string, string>> = {};
  const attributes: Record<string, string> = {};
  let preferences: Record<string, unknown> | undefined;
  const lists: Record<string, string[]> = {};
  for (let i = 0; i < header.length; i++) {
    const column = header[i]!;
    const cell = record[i]!;
    if (cell === "") continue;
    if (column === "id" || column === "tzid") {
      value[column] = cell;
      continue;
    }
    if (column === "preferences") {
      let parsed: unknown;
      try {
        parsed = JSON.parse(cell);
      } catch {
        return { column, message: "is not JSON" };
      }
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        return { column, message: "must be a JSON object" };
      }
      preferences = parsed as Record<string, unknown>;
      continue;
    }
    if (LIST_COLUMNS.has(column)) {
      lists[column.slice("preferences.optOut.".length)] = cell
        .split(";")
        .map((v) => v.trim())
        .filter((v) => v !== "");
      continue;
    }
    const target = TARGET_COLUMN.exec(column);
    if (target) {
      (targets[target[1]!] ??= {})[target[2]!] = cell;
      continue;
    }
    attributes[ATTRIBUTE_COLUMN.exec(column)![1]!] = cell;
  }
  if (Object.keys(targets).length > 0) value.targets = targets;
  if (Object.keys(attributes).length > 0) value.attributes = attributes;
  if (Object.keys(lists).length > 0) {
    const base = preferences ?? {};
    const optOut =
      base.optOut !== null && typeof base.optOut === "object" && !Array.isArray(base.optOut)
        ? (base.optOut as Record<string, unknown>)
        : {};
    preferences = { ...base, optOut: { ...optOut, ...lists } };
  }
  if (preferences !== undefined) value.preferences = preferences;
  return { value };
}

/** Groups rows into chunks of at most {@link MAX_BULK_RECIPIENTS}. */
class Chunker {
  #rows: string[] = [];
  #lines: number[] = [];
  constructor(private readonly size: number) {}
  /** Adds an NDJSON line; returns a full chunk when one is ready. */
  add(line: string, n: number): ImportChunk | null {
    this.#rows.push(line);
    this.#lines.push(n);
    return this.#rows.length >= this.size ? this.take() : null;
  }
  /** The rows so far as a chunk, or null when there are none. */
  take(): ImportChunk | null {
    if (this.#rows.length === 0) return null;
    const chunk: ImportChunk = {
      text: `${this.#rows.join("\n")}\n`,
      contentType: "application/x-ndjson",
      lines: this.#lines,
    };
    this.#rows = [];
    this.#lines = [];
    return chunk;
  }
}

/** The rows of a CSV file, streamed. */
async function* csvItems(file: string, size: number): AsyncGenerator<ImportItem> {
  const source = createReadStream(file);
  const parser = source.pipe(
    parse({ bom: true, info: true, raw: true, skip_empty_lines: true, relax_column_count: true }),
  );
  // pipe() does not pass a read error on: without this it would be an unhandled 'error'.
  source.on("error", (err) => parser.destroy(err));
  const chunks = new Chunker(size);
  let header: string[] | null = null;
  for await (const item of parser as AsyncIterable<{
    record: string[];
    raw: string;
    info: { lines: number };
  }>) {
    // The line the record starts on (a quoted value may span lines).
    const line = item.info.lines - (item.raw.replace(/\r?\n$/, "").match(/\n/g)?.length ?? 0);
    if (header === null) {
      header = item.record.map((c) => c.trim());
      checkCsvHeader(header);
      continue;
    }
    const read = recipientOfCsvRecord(header, item.record);
    if ("value" in read) {
      const full = chunks.add(JSON.stringify(read.value), line);
      if (full) yield { chunk: full };
    } else {
      const idAt = header.indexOf("id");
      yield {
        error: { line, id: item.record[idAt] || null, column: read.column, message: read.message },
      };
    }
  }
  if (header === null) throw new CliError(`${file}: no header line`, EXIT_USAGE);
  const last = chunks.take();
  if (last) yield { chunk: last };
}

/** The rows of an NDJSON file, streamed; blank lines skipped (as the route skips them). */
async function* ndjsonItems(file: string, size: number): AsyncGenerator<ImportItem> {
  const chunks = new Chunker(size);
  let n = 0;
  for await (const text of createInterface({
    input: createReadStream(file),
    crlfDelay: Infinity,
  })) {
    n++;
    if (text.trim() === "") continue;
    const full = chunks.add(text.trim(), n);
    if (full) yield { chunk: full };
  }
  const last = chunks.take();
  if (last) yield { chunk: last };
}

/** The items of a JSON array file, in chunks (numbered by item, from 1). */
function* jsonItems(file: string, size: number): Generator<ImportItem> {
  let rows: unknown;
  try {
    rows = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new CliError(`${file}: not a JSON array (${(err as Error).message})`, EXIT_FAILURE);
  }
  if (!Array.isArray(rows)) throw new CliError(`${file}: not a JSON array`, EXIT_USAGE);
  for (let i = 0; i < rows.length; i += size) {
    const part = rows.slice(i, i + size);
    yield {
      chunk: {
        text: JSON.stringify(part),
        contentType: "application/json",
        lines: part.map((_, j) => i + j + 1),
      },
    };
  }
}

/**
 * Refuses, with one line naming the file and why, a file that cannot be read.
 * @throws CliError (failure) for a missing file, a folder or no permission.
 */
function readable(file: string): void {
  try {
    closeSync(openSync(file, "r"));
    if (statSync(file).isDirectory()) throw Object.assign(new Error("folder"), { code: "EISDIR" });
  } catch (err) {
    throw unreadableFile(file, err);
  }
}

/**
 * The chunks and locally refused rows of an import file, by its extension: `.csv`,
 * `.ndjson`/`.jsonl`, `.json`. `size` is the rows per chunk (the bulk route's limit).
 * @throws CliError (usage) for another extension or a bad CSV header.
 */
export function importItems(
  file: string,
  size: number = MAX_BULK_RECIPIENTS,
): AsyncIterable<ImportItem> | Iterable<ImportItem> {
  readable(file);
  if (/\.csv$/i.test(file)) return csvItems(file, size);
  if (/\.(ndjson|jsonl)$/i.test(file)) return ndjsonItems(file, size);
  if (/\.json$/i.test(file)) return jsonItems(file, size);
  throw new CliError(
    `${file}: give a CSV (.csv), NDJSON (.ndjson, .jsonl) or JSON array (.json) file`,
    EXIT_USAGE,
  );
}
