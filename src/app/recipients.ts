/**
 * The recipient registry (API-10): per tenant, the people and systems reminders are for,
 * under ids of the caller's choosing, kept in `punctual_recipients`.
 *
 * Rules (docs/api.md, "Recipients"):
 * - A write is validated whole before anything is stored: the shape and size limits of
 *   `src/contracts/recipients.ts`, an IANA zone (`tzid`, canonical spelling kept), each
 *   target by its own channel (`validateTarget`: webhook URL and its SSRF checks, e-mail
 *   addresses, Slack and Discord webhook URLs), opt-out channels this server has, a quiet
 *   window as a reminder's (DEL-15). Every issue names the field and the value; a bad
 *   write is a 400 and stores nothing.
 * - `PUT` replaces the whole recipient; a write equal to the stored one changes nothing
 *   (same version). Another tenant's recipient is "not found", never "forbidden".
 * - A bulk upsert takes up to {@link MAX_BULK_RECIPIENTS} rows (a JSON array or NDJSON);
 *   each row is validated and written on its own, so a bad row does not stop the good
 *   ones, and each gets a result. Rows are written in chunks, one statement each.
 */
import { jsonBytes, LIST_PAGE_MAX_BYTES, type ErrorBody } from "../contracts/index.js";
import {
  listRecipientsQuerySchema,
  MAX_BULK_RECIPIENTS,
  recipientBodySchema,
  recipientIdSchema,
  type BulkRecipientResult,
  type BulkRecipientsSummary,
  type RecipientBody,
  type RecipientPage,
  type RecipientView,
} from "../contracts/recipients.js";
import { NotFoundError, ValidationError, type FieldIssue } from "../errors/index.js";
import { canonicalTimeZone, isOffsetZone, isValidTimeZone } from "../recurrence/index.js";
import {
  deleteRecipient,
  listRecipientRows,
  recipientsById,
  upsertRecipients,
  type RecipientRow,
  type RecipientToWrite,
} from "../store/recipients.js";
import { redactTarget } from "../store/schedules.js";
import { tenantOf, type AppContext, type CallContext } from "./context.js";
import { cursorPart, decodeCursor, encodeCursor, type CursorScope } from "./cursor.js";
import { issuesFromZod, parseInput, unknownChannelMessage } from "./input.js";
import { quietHoursIssues } from "./policy.js";
import { forgetRecipientEverywhere, realignRecipients } from "./audience.js";

/** Rows of a bulk upsert validated and written per statement. */
const BULK_CHUNK = 500;

/** Rows of a list read per statement: bounds what one request holds. */
const LIST_CHUNK = 100;

/** The API view of a stored recipient; target secrets redacted. */
export function toRecipientView(row: RecipientRow): RecipientView {
  return {
    id: row.id,
    tzid: row.tzid,
    targets: Object.fromEntries(
      Object.entries(row.targets).map(([channel, target]) => [
        channel,
        redactTarget(target, channel),
      ]),
    ),
    attributes: row.attributes,
    preferences: row.preferences as RecipientView["preferences"],
    version: Number(row.version),
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
  };
}

/** A target's issues from its channel, renamed from `target…` to `targets.<channel>…`. */
function targetIssues(app: AppContext, channel: string, target: unknown, at: string): FieldIssue[] {
  const field = `${at}targets.${channel}`;
  if (!app.channels.has(channel)) {
    return [
      {
        field,
        message: unknownChannelMessage(app.channels.names(), channel),
        value: channel,
      },
    ];
  }
  try {
    app.channels.get(channel).validateTarget(target);
    return [];
  } catch (err) {
    if (!(err instanceof ValidationError)) {
      return [{ field, message: err instanceof Error ? err.message : String(err) }];
    }
    return err.issues.map((issue) => ({
      ...issue,
      field: issue.field === "target" ? field : issue.field.replace(/^target\./, `${field}.`),
    }));
  }
}

/**
 * What the shape alone cannot check: the zone, each target by its channel, opt-out
 * channels, the quiet window. `at` prefixes each field (`""` for a single write).
 */
function recipientIssues(app: AppContext, body: RecipientBody, at: string): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const zoneKnown = isValidTimeZone(body.tzid) && !isOffsetZone(body.tzid);
  if (!zoneKnown) {
    issues.push({
      field: `${at}tzid`,
      message: "must be an IANA time zone such as Asia/Tokyo",
      value: body.tzid,
    });
  }
  for (const [channel, target] of Object.entries(body.targets)) {
    issues.push(...targetIssues(app, channel, target, at));
  }
  (body.preferences.optOut?.channels ?? []).forEach((channel, i) => {
    if (!app.channels.has(channel)) {
      issues.push({
        field: `${at}preferences.optOut.channels.${i}`,
        message: unknownChannelMessage(app.channels.names(), channel),
        value: channel,
      });
    }
  });
  const quiet = body.preferences.quietHours;
  if (quiet && zoneKnown) {
    issues.push(
      ...quietHoursIssues(
        { ...quiet, tzid: quiet.tzid ?? body.tzid },
        `${at}preferences.quietHours`,
      ),
    );
  }
  return issues;
}

/** A validated recipient ready to store. */
function toWrite(id: string, body: RecipientBody): RecipientToWrite {
  return {
    id,
    tzid: canonicalTimeZone(body.tzid),
    targets: body.targets,
    attributes: body.attributes,
    preferences: body.preferences,
  };
}

/**
 * Validates one recipient (`id` and body) completely.
 * @returns the recipient to store, or the issues (fields prefixed with `at`).
 */
function validate(
  app: AppContext,
  id: unknown,
  body: unknown,
  at: string,
): { ok: true; value: RecipientToWrite } | { ok: false; issues: FieldIssue[] } {
  const issues: FieldIssue[] = [];
  const idResult = recipientIdSchema.safeParse(id);
  if (!idResult.success) {
    issues.push(...issuesFromZod(idResult.error, `${at}id`, id));
  }
  const parsed = recipientBodySchema.safeParse(body);
  if (!parsed.success) {
    issues.push(...issuesFromZod(parsed.error, at.replace(/\.$/, ""), body));
  } else {
    issues.push(...recipientIssues(app, parsed.data, at));
  }
  if (issues.length > 0 || !parsed.success || !idResult.success) return { ok: false, issues };
  return { ok: true, value: toWrite(idResult.data, parsed.data) };
}

/**
 * API-10: creates or replaces the recipient `id` of the caller's tenant
 * (`PUT /v1/recipients/{id}`).
 * @returns the stored recipient; `created` when the id was new.
 * @throws ValidationError naming each bad field (nothing stored).
 */
export async function putRecipient(
  app: AppContext,
  id: string,
  body: unknown,
  ctx: CallContext = {},
): Promise<{ recipient: RecipientView; created: boolean }> {
  const result = validate(app, id, body, "");
  if (!result.ok) throw new ValidationError(result.issues);
  const tenant = tenantOf(ctx);
  const [written] = await writeRecipients(app, tenant, [result.value]);
  if (written) {
    return { recipient: toRecipientView(written), created: Number(written.version) === 1 };
  }
  // Equal to what is stored: nothing changed.
  const [row] = await recipientsById(app.db, { tenant, ids: [result.value.id] });
  return { recipient: toRecipientView(row!), created: false };
}

/** API-10: one recipient of the caller's tenant. @throws NotFoundError */
export async function getRecipient(
  app: AppContext,
  id: string,
  ctx: CallContext = {},
): Promise<RecipientView> {
  if (!recipientIdSchema.safeParse(id).success) throw new NotFoundError("recipient", id);
  const [row] = await recipientsById(app.db, { tenant: tenantOf(ctx), ids: [id] });
  if (!row) throw new NotFoundError("recipient", id);
  return toRecipientView(row);
}

/**
 * API-10: removes a recipient of the caller's tenant.
 * @throws NotFoundError when the tenant has no such recipient.
 */
export async function removeRecipient(
  app: AppContext,
  id: string,
  ctx: CallContext = {},
): Promise<void> {
  const tenant = tenantOf(ctx);
  const removed =
    recipientIdSchema.safeParse(id).success &&
    (await app.db.transaction(async (tx) => {
      // API-12: its waiting deliveries on every schedule are cancelled with it.
      await forgetRecipientEverywhere(tx, { now: app.now(), tenant, id });
      return deleteRecipient(tx, { tenant, id });
    }));
  if (!removed) throw new NotFoundError("recipient", id);
}

/** The part of a recipient that decides when its deliveries are due (API-12). */
function timing(r: { tzid: string; preferences: Record<string, unknown> }): string {
  return JSON.stringify([r.tzid, r.preferences.quietHours ?? null]);
}

/**
 * API-10 / API-12: writes recipients (distinct ids) in one transaction; those whose zone
 * or quiet hours changed have their future deliveries planned again from now, in the same
 * transaction (the plan sweep, woken, writes them as they now are).
 * @returns the rows created or changed.
 */
async function writeRecipients(
  app: AppContext,
  tenant: string,
  recipients: RecipientToWrite[],
): Promise<RecipientRow[]> {
  let moved = 0;
  const written = await app.db.transaction(async (tx) => {
    const before = new Map(
      (await recipientsById(tx, { tenant, ids: recipients.map((r) => r.id) })).map((r) => [
        r.id,
        timing(r),
      ]),
    );
    const rows = await upsertRecipients(tx, { now: app.now(), tenant, recipients });
    const changed = rows
      .filter((r) => before.has(r.id) && before.get(r.id) !== timing(r))
      .map((r) => r.id);
    moved = await realignRecipients(tx, { now: app.now(), tenant, ids: changed });
    return rows;
  });
  if (moved > 0) app.wake();
  return written;
}

/**
 * API-10: one keyset page of the caller's recipients by id (byte order), `order` `asc`
 * (the default) or `desc`, filtered by `q` (a case-insensitive substring of the id).
 * A page ends early, with a cursor, rather than pass {@link LIST_PAGE_MAX_BYTES}.
 * `nextCursor` (null on the last page) continues the same order and `q`.
 * @throws ValidationError a bad query field, or a `cursor` of another order or `q`.
 */
export async function listRecipients(
  app: AppContext,
  query: unknown = {},
  ctx: CallContext = {},
): Promise<RecipientPage> {
  const q = parseInput(listRecipientsQuerySchema, query);
  const scope: CursorScope = { list: "recipients", order: q.order, q: q.q };
  let afterId: string | null = null;
  if (q.cursor !== undefined) {
    [afterId] = decodeCursor(q.cursor, scope, [cursorPart.text]) as [string];
  }
  const items: RecipientView[] = [];
  let bytes = 0;
  let more = false;
  let last: string | null = null;
  page: while (items.length < q.limit) {
    const want = Math.min(LIST_CHUNK, q.limit - items.length);
    // One row more than wanted tells whether the list goes on.
    const rows = await listRecipientRows(app.db, {
      tenant: tenantOf(ctx),
      q: q.q ?? null,
      order: q.order,
      afterId,
      limit: want + 1,
    });
    more = rows.length > want;
    for (const row of rows.slice(0, want)) {
      const view = toRecipientView(row);
      const size = jsonBytes(view) + 1;
      if (items.length > 0 && bytes + size > LIST_PAGE_MAX_BYTES) {
        more = true;
        break page;
      }
      items.push(view);
      bytes += size;
      last = row.id;
    }
    if (!more) break;
    afterId = last;
  }
  return {
    items,
    nextCursor: more && last !== null ? encodeCursor([last], scope) : null,
  };
}

/** One row of a bulk body: a parsed value, or a line that was not JSON. */
export type BulkRow = { value: unknown } | { unreadable: string };

/**
 * API-10: the rows of an NDJSON body (`application/x-ndjson`): one JSON value per line,
 * blank lines skipped. A line that is not JSON becomes an unreadable row (its result is
 * an error naming the line); the others are read.
 * @throws ValidationError (field `(body)`) for more than {@link MAX_BULK_RECIPIENTS} rows
 *   or none, before any is parsed.
 */
export function readNdjsonRows(text: string): BulkRow[] {
  const lines = text.split("\n").map((line, n) => ({ line: line.trim(), n: n + 1 }));
  const filled = lines.filter((l) => l.line.length > 0);
  checkRowCount(filled.length);
  return filled.map(({ line, n }) => {
    try {
      return { value: JSON.parse(line) as unknown };
    } catch {
      return { unreadable: `line ${n} is not JSON` };
    }
  });
}

function checkRowCount(count: number): void {
  if (count > MAX_BULK_RECIPIENTS) {
    throw new ValidationError({
      field: "(body)",
      message: `must have at most ${MAX_BULK_RECIPIENTS} rows; send the rest in another request`,
      value: count,
    });
  }
  if (count === 0) {
    throw new ValidationError({ field: "(body)", message: "must have at least 1 row" });
  }
}

function errorOf(issues: readonly FieldIssue[]): NonNullable<BulkRecipientResult["error"]> {
  const err = new ValidationError([...issues]);
  const body: ErrorBody["error"] = {
    code: err.code,
    message: err.message,
    issues: issues.map((i) => ({ ...i })),
  };
  return body;
}

/**
 * API-10: creates or replaces many recipients of the caller's tenant
 * (`POST /v1/recipients:bulk`): a JSON array, or the rows of {@link readNdjsonRows}.
 * Each row is validated like a `PUT` body with its `id`; a bad row is reported (status
 * `error`, its issues named as in a `PUT`) and the others are written. An id given twice
 * is written once, from its first row; the later rows are errors.
 * @throws ValidationError (field `(body)`) when the body is not an array or has more than
 *   {@link MAX_BULK_RECIPIENTS} rows (nothing stored).
 */
export async function bulkUpsertRecipients(
  app: AppContext,
  body: unknown,
  ctx: CallContext = {},
): Promise<BulkRecipientsSummary> {
  let rows: BulkRow[];
  if (typeof body === "string") rows = readNdjsonRows(body);
  else if (Array.isArray(body)) {
    checkRowCount(body.length);
    rows = body.map((value: unknown) => ({ value }));
  } else {
    throw new ValidationError({
      field: "(body)",
      message: "must be a JSON array of recipients, or NDJSON (Content-Type: application/x-ndjson)",
    });
  }
  const tenant = tenantOf(ctx);
  const results: BulkRecipientResult[] = [];
  const firstIndex = new Map<string, number>();
  for (let start = 0; start < rows.length; start += BULK_CHUNK) {
    const chunk: Array<{ index: number; value: RecipientToWrite }> = [];
    rows.slice(start, start + BULK_CHUNK).forEach((row, i) => {
      const index = start + i;
      if ("unreadable" in row) {
        results[index] = {
          index,
          id: null,
          status: "error",
          error: errorOf([{ field: "(body)", message: row.unreadable }]),
        };
        return;
      }
      const value = row.value;
      const object =
        value !== null && typeof value === "object" && !Array.isArray(value)
          ? (value as Record<string, unknown>)
          : null;
      const rawId = object?.id;
      const id = typeof rawId === "string" ? rawId : null;
      if (object === null) {
        results[index] = {
          index,
          id,
          status: "error",
          error: errorOf([{ field: "(row)", message: "must be a JSON object" }]),
        };
        return;
      }
      const { id: _id, ...rest } = object;
      const checked = validate(app, rawId, rest, "");
      if (!checked.ok) {
        results[index] = { index, id, status: "error", error: errorOf(checked.issues) };
        return;
      }
      const seen = firstIndex.get(checked.value.id);
      if (seen !== undefined) {
        results[index] = {
          index,
          id,
          status: "error",
          error: errorOf([
            {
              field: "id",
              message: `given twice in this body (first at row ${seen}); that row was written`,
              value: checked.value.id,
            },
          ]),
        };
        return;
      }
      firstIndex.set(checked.value.id, index);
      chunk.push({ index, value: checked.value });
    });
    if (chunk.length === 0) continue;
    const written = await writeRecipients(
      app,
      tenant,
      chunk.map((c) => c.value),
    );
    const versions = new Map(written.map((row) => [row.id, Number(row.version)]));
    for (const { index, value } of chunk) {
      // Not returned: equal to what was stored, nothing changed.
      const version = versions.get(value.id);
      results[index] = { index, id: value.id, status: version === 1 ? "created" : "updated" };
    }
  }
  const count = (status: BulkRecipientResult["status"]) =>
    results.filter((r) => r.status === status).length;
  return {
    created: count("created"),
    updated: count("updated"),
    errors: count("error"),
    results,
  };
}
