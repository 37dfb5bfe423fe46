/**
 * OPS-16: the reads of an explanation (src/app/explain.ts): a schedule's delivery rows due
 * in a window, in keyset pages by (occurrence, reminder key, id), and the attempts of a
 * page of rows. Read-only; scoped by tenant (API-2): a schedule of another tenant yields
 * nothing.
 */
import type { Database, Queryable } from "./database.js";
import { NOW } from "./deliveries/sql.js";
import { TOKENS_NOW } from "./rate-limits.js";
import { columnsOf, rows } from "./statement.js";

/**
 * A delivery row as an explanation reads it (OPS-16): only the columns it shows, and every
 * instant as epoch milliseconds (truncated to the millisecond, like a `Date`), so a page
 * of 10,000 rows is read without parsing 100,000 timestamps.
 */
export interface ExplainDeliveryRow {
  id: number;
  schedule_id: string;
  reminder_key: string;
  /** API-11: the recipient the delivery is for, or null. */
  recipient_id: string | null;
  occurrence_ms: number;
  due_ms: number;
  /** When the row is next eligible (due time, a retry's time, an open circuit's next probe). */
  run_ms: number;
  state: string;
  attempt: number;
  lease_owner: string | null;
  lease_expires_ms: number | null;
  claimed_ms: number | null;
  sent_ms: number | null;
  /** DEL-14: the sending attempt kept on the row (migration 0007): its worker, or null. */
  sent_by: string | null;
  send_started_ms: number | null;
  send_status: number | null;
  send_message_id: string | null;
  finished_ms: number | null;
  reason: string | null;
  deferred_until_ms: number | null;
  deferred_reason: string | null;
  /** DEL-13: the row's limiter, `tenant/key`, or null (not limited). */
  limiter: string | null;
  created_ms: number;
  updated_ms: number;
  /** True when `punctual_triggers` records it (an extra send, not an occurrence of the rule). */
  triggered: boolean;
  /** DEL-19: the digest key of a digest member, or null. */
  digest_key: string | null;
  /** DEL-19: the digest the member was formed into, or null. */
  digest_id: string | null;
  /** DEL-19: when that digest was formed (its membership frozen), epoch ms, or null. */
  digest_formed_ms: number | null;
  /** DEL-19: how many items that digest has, or null. */
  digest_items: number | null;
  /**
   * DEL-13 / CH-7 / DEL-19: why that digest waits unsent in `retry` (`RATE_LIMITED`,
   * `CIRCUIT_OPEN`, `RETRY_AFTER`), or null.
   */
  digest_deferred_reason: string | null;
  /** Until when that digest waits (its `run_at`), epoch ms, or null. */
  digest_deferred_until_ms: number | null;
}

/** `column` as epoch ms, truncated to the millisecond (as a `Date` holds it). */
const epochMs = (column: string) =>
  `round(date_part('epoch', date_trunc('milliseconds', ${column})) * 1000)`;

/**
 * The fields of an {@link ExplainDeliveryRow} and their expressions on alias `d`; `rare`
 * marks the fields only some rows have (a claimed row's lease, a deferral, a limiter, a
 * digest), which a page carries for those rows only. The one place that reads the
 * deliveries table's columns for an explanation. A digest is read only for a row that has
 * one (a `case` keeps the sub-select from running for the others).
 */
const EXPLAIN_FIELDS: ReadonlyArray<
  readonly [name: keyof ExplainDeliveryRow, expr: string, rare?: "rare"]
> = [
  ["id", "d.id"],
  ["schedule_id", "d.schedule_id"],
  ["reminder_key", "d.reminder_key"],
  ["recipient_id", "d.recipient_id"],
  ["occurrence_ms", epochMs("d.occurrence_at")],
  ["due_ms", epochMs("d.due_at")],
  ["run_ms", epochMs("d.run_at")],
  ["state", "d.state"],
  ["attempt", "d.attempt"],
  ["sent_ms", epochMs("d.sent_at")],
  ["sent_by", "d.sent_by"],
  ["send_started_ms", epochMs("d.send_started_at")],
  ["send_status", "d.send_status"],
  ["send_message_id", "d.send_message_id"],
  ["finished_ms", epochMs("d.finished_at")],
  ["reason", "d.reason"],
  ["created_ms", epochMs("d.created_at")],
  ["updated_ms", epochMs("d.updated_at")],
  ["triggered", "exists (select 1 from punctual_triggers t where t.delivery_id = d.id)"],
  ["lease_owner", "d.lease_owner", "rare"],
  ["lease_expires_ms", epochMs("d.lease_expires_at"), "rare"],
  ["claimed_ms", epochMs("d.claimed_at"), "rare"],
  ["deferred_until_ms", epochMs("d.deferred_until"), "rare"],
  ["deferred_reason", "d.deferred_reason", "rare"],
  ["limiter", "d.limiter", "rare"],
  ["digest_key", "d.digest_key", "rare"],
  ["digest_id", "d.digest_id", "rare"],
  [
    "digest_formed_ms",
    `case when d.digest_id is not null then
       (select ${epochMs("g.created_at")} from punctual_digests g where g.id = d.digest_id) end`,
    "rare",
  ],
  [
    "digest_items",
    `case when d.digest_id is not null then
       (select g.member_count from punctual_digests g where g.id = d.digest_id) end`,
    "rare",
  ],
  [
    "digest_deferred_reason",
    `case when d.digest_id is not null then
       (select g.deferred_reason from punctual_digests g
        where g.id = d.digest_id and g.state = 'retry') end`,
    "rare",
  ],
  [
    "digest_deferred_until_ms",
    `case when d.digest_id is not null then
       (select ${epochMs("g.deferred_until")} from punctual_digests g
        where g.id = d.digest_id and g.state = 'retry') end`,
    "rare",
  ],
];

/**
 * The fields of a page's rows that every row has, column by column: the fields of
 * {@link EXPLAIN_FIELDS} that are not rare, but the schedule id (the page's own) and
 * `triggered` (a list of its own, {@link ExplainPageColumns}).
 */
const PAGE_COLUMN_FIELDS = EXPLAIN_FIELDS.filter(
  ([name, , rare]) => !rare && name !== "schedule_id" && name !== "triggered",
);
/** The fields only some rows have, in {@link ExplainRareTuple} order after the row's place. */
const PAGE_RARE_FIELDS = EXPLAIN_FIELDS.filter(([, , rare]) => rare);

/**
 * The rare fields of one row of a page that has any of them, after its place in the page
 * (from 1), in {@link EXPLAIN_FIELDS} order.
 */
export type ExplainRareTuple = [
  n: number,
  lease_owner: string | null,
  lease_expires_ms: number | null,
  claimed_ms: number | null,
  deferred_until_ms: number | null,
  deferred_reason: string | null,
  limiter: string | null,
  digest_key: string | null,
  digest_id: string | null,
  digest_formed_ms: number | null,
  digest_items: number | null,
  digest_deferred_reason: string | null,
  digest_deferred_until_ms: number | null,
];

/**
 * A page's delivery rows as {@link EXPLAIN_PAGE_SQL} returns them: one list per field
 * that every row has (index k is the row whose place in the page is `n[k]`), then the
 * places of the triggered rows, then the rare fields of the rows that have any
 * ({@link ExplainRareTuple}). The lists are null for an empty page, the last two when no
 * row qualifies. Instants are whole epoch milliseconds.
 */
export type ExplainPageColumns = [
  n: number[] | null,
  id: number[] | null,
  reminder_key: string[] | null,
  recipient_id: (string | null)[] | null,
  occurrence_ms: number[] | null,
  due_ms: number[] | null,
  run_ms: number[] | null,
  state: string[] | null,
  attempt: number[] | null,
  sent_ms: (number | null)[] | null,
  sent_by: (string | null)[] | null,
  send_started_ms: (number | null)[] | null,
  send_status: (number | null)[] | null,
  send_message_id: (string | null)[] | null,
  finished_ms: (number | null)[] | null,
  reason: (string | null)[] | null,
  created_ms: number[] | null,
  updated_ms: number[] | null,
  triggered: number[] | null,
  rare: ExplainRareTuple[] | null,
];

/**
 * The recorded attempts and actions of a page's rows as {@link EXPLAIN_PAGE_SQL} returns
 * them, one list per field (index k is one event); null lists when there are none. `part`
 * is 0 for an attempt and 1 for an action, `seq` its id in its table (the order it was
 * recorded in); the other fields are those of an {@link ExplainHistoryRow}.
 */
export type ExplainHistoryColumns = [
  delivery_id: number[] | null,
  part: (0 | 1)[] | null,
  seq: number[] | null,
  at_ms: number[] | null,
  ended_ms: (number | null)[] | null,
  by: string[] | null,
  attempt: (number | null)[] | null,
  what: string[] | null,
  settled: (boolean | null)[] | null,
  status: (number | null)[] | null,
  error: (string | null)[] | null,
  outcome: (string | null)[] | null,
];

/** The select list of an {@link ExplainDeliveryRow} on alias `d`, one column a field. */
const EXPLAIN_SELECT = EXPLAIN_FIELDS.map(([name, expr]) => `${expr} as ${name}`).join(
  ",\n       ",
);

/** A field's expression as JSON: instants as whole numbers (`bigint`: no float formatting). */
const asJson = ([name, expr]: readonly [string, string, string?]) =>
  name.endsWith("_ms") ? `(${expr})::bigint` : expr;

/** The columns of `punctual_deliveries` that rare fields read, on alias `d`. */
const RARE_SOURCE_COLUMNS = [
  ...new Set(
    PAGE_RARE_FIELDS.flatMap(([, expr]) => [...expr.matchAll(/\bd\.([a-z_]+)/g)].map((m) => m[0])),
  ),
];

/**
 * The rows of a page (alias `d`, the page's place `d.n`) as one JSON value, an
 * {@link ExplainPageColumns}: `json_agg` per field (its output function is looked up
 * once per page, where `json_build_array` looks up each argument's type per row), the rare
 * fields built only for the rows that have any, the triggered rows by one read of the
 * schedule's triggers (`punctual_triggers_schedule`; a trigger's schedule is its
 * delivery's) rather than a probe per row. $2 schedule id.
 */
const EXPLAIN_PAGE_COLUMNS_JSON = `json_build_array(
    json_agg(d.n), ${PAGE_COLUMN_FIELDS.map((f) => `json_agg(${asJson(f)})`).join(", ")},
    json_agg(d.n) filter (where d.id in (select t.delivery_id from punctual_triggers t
                                         where t.schedule_id = $2::uuid)),
    json_agg(json_build_array(d.n, ${PAGE_RARE_FIELDS.map(asJson).join(", ")}))
      filter (where not (${RARE_SOURCE_COLUMNS.map((c) => `${c} is null`).join(" and ")})))`;

/** The columns of `punctual_deliveries` that {@link EXPLAIN_FIELDS} reads, on alias `d`. */
const EXPLAIN_SOURCE_COLUMNS = [
  ...new Set(
    EXPLAIN_FIELDS.flatMap(([, expr]) => [...expr.matchAll(/\bd\.([a-z_]+)/g)]).map(
      (m) => `d.${m[1]}`,
    ),
  ),
].join(", ");

/** The order of an explanation's keyset pages on alias `d`. */
const EXPLAIN_ORDER = `date_trunc('milliseconds', d.occurrence_at), d.reminder_key collate "C", d.id`;

/**
 * One keyset page of an explanation as {@link EXPLAIN_PAGE_SQL} returns it: the delivery
 * rows ({@link ExplainPageColumns}) and the recorded history of those rows
 * ({@link ExplainHistoryColumns}).
 */
export interface ExplainPageRow {
  rows: ExplainPageColumns;
  history: ExplainHistoryColumns;
}

/** Result columns of {@link EXPLAIN_PAGE_SQL}. */
export const EXPLAIN_PAGE_COLUMNS = columnsOf<ExplainPageRow>()(["rows", "history"]);

/** The page's delivery ids, for `= any(…)`: computed once per statement (an init plan). */
const PAGE_IDS = "array(select p.id from page p)";

/**
 * OPS-16 / DEL-14 / DEL-12: one keyset page of an explanation, in one statement (one
 * snapshot): the delivery rows of a schedule of the tenant due in `[$3, $4)`, past the
 * cursor `($5, $6, $7)` in the order (occurrence_at to the millisecond, reminder_key by
 * code point, id) — the order src/app/explain.ts merges the rule's expected occurrences
 * in — at most `$8` rows; and the recorded attempts (`punctual_attempts`; the sending
 * attempt kept on the row is a field of the row, {@link ExplainDeliveryRow.sent_by}) and
 * operator actions of those rows. `$5` NULL: from the start.
 *
 * Both come back as one JSON value each, column by column ({@link ExplainPageRow}): a page
 * of 10,000 rows is then two values to parse, mostly arrays of numbers, rather than
 * 290,000 column values, each a string to decode, and a row object the driver builds; and
 * the server formats each field with an output function looked up once per page
 * (docs/benchmarks.md).
 *
 * The reads do not grow with the tables: the schedule's rows are found by
 * `punctual_deliveries_schedule` (schedule_id, state) and sorted (a schedule holds at most
 * the rows its plan and retention keep); the page is kept (`materialized`), and its
 * history is read by each history table's `(delivery_id, …)` index with the page's ids
 * as one array: one descent per id, in one index scan. The array is a sub-select's, whose
 * length the planner does not know (it assumes a few elements), so the plan is that index
 * scan whatever the page's or the table's size; a `$1` array of a page's 8,784 ids, its
 * length known, was planned as a scan of every attempt. The fields are computed for the
 * page's rows only (outside the limit).
 * $1 tenant, $2 schedule id, $3 due from, $4 due to, $5 occurrence after, $6 reminder key
 * after, $7 id after, $8 limit.
 */
export const EXPLAIN_PAGE_SQL = `
with page as materialized (
  select ${EXPLAIN_SOURCE_COLUMNS}, row_number() over (order by ${EXPLAIN_ORDER}) as n
  from punctual_delivery_rows d
  where d.schedule_id = $2::uuid
    and exists (select 1 from punctual_schedules s where s.id = $2::uuid and s.tenant = $1)
    and d.due_at >= $3::timestamptz and d.due_at < $4::timestamptz
    and ($5::timestamptz is null
         or (date_trunc('milliseconds', d.occurrence_at), d.reminder_key collate "C", d.id)
            > ($5::timestamptz, $6::text collate "C", $7::bigint))
  order by ${EXPLAIN_ORDER}
  limit $8
)
select
  (select ${EXPLAIN_PAGE_COLUMNS_JSON} from page d) as rows,
  (select json_build_array(json_agg(h.delivery_id), json_agg(h.part), json_agg(h.seq),
                           json_agg(h.at_ms), json_agg(h.ended_ms), json_agg(h.by),
                           json_agg(h.attempt), json_agg(h.what), json_agg(h.settled),
                           json_agg(h.status), json_agg(h.error), json_agg(h.outcome))
   from (
     select a.delivery_id, 0 as part, a.id as seq,
            (${epochMs("a.started_at")})::bigint as at_ms,
            (${epochMs("a.ended_at")})::bigint as ended_ms, a.worker as by, a.attempt,
            a.outcome as what, a.settled, a.status, a.error, null::text as outcome
     from punctual_attempts a where a.delivery_id = any(${PAGE_IDS})
     union all
     select x.delivery_id, 1, x.id, (${epochMs("x.at")})::bigint, null, x.actor, null,
            x.action, null, null, null, x.outcome
     from punctual_delivery_actions x where x.delivery_id = any(${PAGE_IDS})
   ) h) as history`;

/**
 * OPS-16: the settings of {@link EXPLAIN_PAGE_SQL}'s transaction, set local (they end
 * with it). One process: a schedule's rows are a few thousand; the planner's estimate for
 * a bitmap read of them is high enough that it planned a parallel sort (two workers, a
 * gather merge), which took 350–460 ms where the same plan in one process took 145–160 ms
 * (10M rows stored, load ≈ 11). No JIT: the estimated cost of a page of 10,000 rows with
 * their history may pass PostgreSQL's `jit_above_cost` and `jit_optimize_above_cost`;
 * compiling the statement with optimization and inlining took 2.4 s of the server's CPU
 * (with a probe per row, as the statement read its history then) to save a few ms of
 * interpretation (docs/benchmarks.md). PGlite has no JIT; the setting exists there too.
 * No parameters; returns the settings as set.
 */
export const EXPLAIN_SERIAL_SQL = `
select set_config('max_parallel_workers_per_gather', '0', true) as max_parallel_workers_per_gather,
       set_config('jit', 'off', true) as jit`;

/** Result columns of {@link EXPLAIN_SERIAL_SQL}. */
export const EXPLAIN_SERIAL_COLUMNS = columnsOf<{
  max_parallel_workers_per_gather: string;
  jit: string;
}>()(["max_parallel_workers_per_gather", "jit"]);

/**
 * One keyset page of an explanation: the delivery rows in page order, and for each (same
 * index) its recorded attempts, then its operator actions (an empty list when none).
 */
export interface ExplainPage {
  rows: ExplainDeliveryRow[];
  history: (readonly ExplainHistoryRow[])[];
}

/** The history of a row that has none, shared. */
const NO_HISTORY: readonly ExplainHistoryRow[] = Object.freeze([]);

/**
 * Runs {@link EXPLAIN_PAGE_SQL} in a transaction of its own, after
 * {@link EXPLAIN_SERIAL_SQL}.
 */
export async function explainPage(
  db: Database,
  p: {
    tenant: string;
    scheduleId: string;
    dueFrom: Date;
    dueTo: Date;
    after: { occurrenceAt: Date; reminderKey: string; id: number } | null;
    limit: number;
  },
): Promise<ExplainPage> {
  const found = await db.transaction(async (tx) => {
    await rows(tx, EXPLAIN_SERIAL_SQL, []);
    return rows<ExplainPageRow>(tx, EXPLAIN_PAGE_SQL, [
      p.tenant,
      p.scheduleId,
      p.dueFrom,
      p.dueTo,
      p.after?.occurrenceAt ?? null,
      p.after?.reminderKey ?? null,
      p.after?.id ?? null,
      p.limit,
    ]);
  });
  const page = found[0];
  return page ? pageOf(page, p.scheduleId) : { rows: [], history: [] };
}

/**
 * The {@link ExplainPage} of an {@link ExplainPageRow} of schedule `scheduleId`: the rows
 * in page order, and each row's history — its attempts in the order recorded, then its
 * actions oldest first.
 */
export function pageOf(page: ExplainPageRow, scheduleId: string): ExplainPage {
  const [n, id, key, recipient, occurrence, due, run, state, attempt, sent, sentBy] = page.rows;
  const [, , , , , , , , , , , sendStarted, sendStatus, messageId, finished, reason] = page.rows;
  const [, , , , , , , , , , , , , , , , created, updated, triggered, rare] = page.rows;
  const count = n?.length ?? 0;
  const rows = new Array<ExplainDeliveryRow>(count);
  for (let k = 0; k < count; k++) {
    rows[n![k]! - 1] = {
      id: id![k]!,
      schedule_id: scheduleId,
      reminder_key: key![k]!,
      recipient_id: recipient![k]!,
      occurrence_ms: occurrence![k]!,
      due_ms: due![k]!,
      run_ms: run![k]!,
      state: state![k]!,
      attempt: attempt![k]!,
      lease_owner: null,
      lease_expires_ms: null,
      claimed_ms: null,
      sent_ms: sent![k]!,
      sent_by: sentBy![k]!,
      send_started_ms: sendStarted![k]!,
      send_status: sendStatus![k]!,
      send_message_id: messageId![k]!,
      finished_ms: finished![k]!,
      reason: reason![k]!,
      deferred_until_ms: null,
      deferred_reason: null,
      limiter: null,
      created_ms: created![k]!,
      updated_ms: updated![k]!,
      triggered: false,
      digest_key: null,
      digest_id: null,
      digest_formed_ms: null,
      digest_items: null,
      digest_deferred_reason: null,
      digest_deferred_until_ms: null,
    };
  }
  for (const place of triggered ?? []) rows[place - 1]!.triggered = true;
  for (const r of rare ?? []) {
    const row = rows[r[0] - 1]!;
    row.lease_owner = r[1];
    row.lease_expires_ms = r[2];
    row.claimed_ms = r[3];
    row.deferred_until_ms = r[4];
    row.deferred_reason = r[5];
    row.limiter = r[6];
    row.digest_key = r[7];
    row.digest_id = r[8];
    row.digest_formed_ms = r[9];
    row.digest_items = r[10];
    row.digest_deferred_reason = r[11];
    row.digest_deferred_until_ms = r[12];
  }
  return { rows, history: historyOf(page.history, rows) };
}

/**
 * The history of each of `rows` (same index) from {@link ExplainHistoryColumns}: by
 * delivery, attempts (part 0) then actions (part 1), each in the order recorded (`seq`).
 */
function historyOf(h: ExplainHistoryColumns, rows: readonly ExplainDeliveryRow[]) {
  const [deliveryId, part, seq, at, ended, by, attempt, what, settled, status, error] = h;
  const outcome = h[11];
  const out = rows.map(() => NO_HISTORY);
  const count = deliveryId?.length ?? 0;
  if (count === 0) return out;
  const placeOf = new Map<number, number>();
  for (let k = 0; k < rows.length; k++) placeOf.set(rows[k]!.id, k);
  /** Each row's events as indexes into the lists, in the order the lists give them. */
  const events = new Array<number[] | undefined>(rows.length);
  for (let k = 0; k < count; k++) {
    const place = placeOf.get(deliveryId![k]!);
    if (place === undefined) continue;
    const list = events[place];
    if (list === undefined) events[place] = [k];
    else list.push(k);
  }
  const before = (a: number, b: number) => part![a]! - part![b]! || seq![a]! - seq![b]!;
  for (let place = 0; place < rows.length; place++) {
    const list = events[place];
    if (list === undefined) continue;
    // The index returns a row's attempts by attempt number; recorded order is by id.
    for (let e = 1; e < list.length; e++) {
      if (before(list[e - 1]!, list[e]!) > 0) {
        list.sort(before);
        break;
      }
    }
    out[place] = list.map((k) => ({
      kind: part![k] === 0 ? ("attempt" as const) : ("action" as const),
      delivery_id: deliveryId![k]!,
      at_ms: at![k]!,
      ended_ms: ended![k]!,
      by: by![k]!,
      attempt: attempt![k]!,
      what: what![k]!,
      settled: settled![k]!,
      status: status![k]!,
      error: error![k]!,
      outcome: outcome![k]!,
    }));
  }
  return out;
}

/**
 * OPS-16: one delivery row of the tenant by id, with whether it was triggered.
 * $1 tenant, $2 delivery id.
 */
export const EXPLAIN_DELIVERY_SQL = `
select ${EXPLAIN_SELECT}
from punctual_delivery_rows d join punctual_schedules s on s.id = d.schedule_id
where s.tenant = $1 and d.id = $2`;

/** Result columns of {@link EXPLAIN_DELIVERY_SQL}. */
export const EXPLAIN_DELIVERY_COLUMNS = columnsOf<ExplainDeliveryRow>()([
  "id",
  "schedule_id",
  "reminder_key",
  "recipient_id",
  "occurrence_ms",
  "due_ms",
  "run_ms",
  "state",
  "attempt",
  "sent_ms",
  "sent_by",
  "send_started_ms",
  "send_status",
  "send_message_id",
  "finished_ms",
  "reason",
  "created_ms",
  "updated_ms",
  "triggered",
  "lease_owner",
  "lease_expires_ms",
  "claimed_ms",
  "deferred_until_ms",
  "deferred_reason",
  "limiter",
  "digest_key",
  "digest_id",
  "digest_formed_ms",
  "digest_items",
  "digest_deferred_reason",
  "digest_deferred_until_ms",
]);

/** Runs {@link EXPLAIN_DELIVERY_SQL}; null when the tenant has no such delivery. */
export async function explainDeliveryRow(
  db: Queryable,
  p: { tenant: string; id: number },
): Promise<ExplainDeliveryRow | null> {
  const found = await rows<ExplainDeliveryRow>(db, EXPLAIN_DELIVERY_SQL, [p.tenant, p.id]);
  return found[0] ?? null;
}

/**
 * One recorded event of a delivery an explanation adds to its timeline: a try
 * (`kind` `attempt`, a row of `punctual_attempts`) or an operator's redrive or resolve
 * (`kind` `action`, a row of `punctual_delivery_actions`, migration 0042). Instants are
 * epoch ms. Fields of the other kind are null.
 */
export interface ExplainHistoryRow {
  kind: "attempt" | "action";
  delivery_id: number;
  /** attempt: its start; action: when it was done. */
  at_ms: number;
  /** attempt: its end. */
  ended_ms: number | null;
  /** attempt: the worker (instance id); action: who (`api-key:<id>`, `operator`, …). */
  by: string;
  /** attempt: its number (the fencing token, DEL-2). */
  attempt: number | null;
  /** attempt: `sent`, `transient`, …; action: `redrive` or `resolve`. */
  what: string;
  /** attempt: false when the settle found the lease lost. */
  settled: boolean | null;
  status: number | null;
  error: string | null;
  /** action: the outcome of a resolve (`sent`, `dead`). */
  outcome: string | null;
}

/**
 * OPS-16 / DEL-14 / DEL-12: the recorded attempts (`punctual_attempts`; the sending attempt
 * kept on the delivery row is read with the row, {@link ExplainDeliveryRow.sent_by}) and
 * operator actions of many deliveries, in one statement: by delivery in the order of
 * `$1`, attempts in the order recorded, then actions oldest first. Each delivery is one
 * probe of each table's `(delivery_id, …)` index (a lateral join per id), so the cost
 * follows the page, never the tables' size: a plain `delivery_id = any($1)` over a page of
 * 8,784 ids was planned as a scan of every attempt (docs/benchmarks.md).
 * $1 delivery ids (bigint[]).
 */
export const EXPLAIN_HISTORY_SQL = `
select h.kind, h.delivery_id, h.at_ms, h.ended_ms, h.by, h.attempt, h.what, h.settled,
       h.status, h.error, h.outcome
from unnest($1::bigint[]) with ordinality as u(id, n)
cross join lateral (
  select 'attempt' as kind, a.delivery_id,
         round(date_part('epoch', date_trunc('milliseconds', a.started_at)) * 1000) as at_ms,
         round(date_part('epoch', date_trunc('milliseconds', a.ended_at)) * 1000) as ended_ms,
         a.worker as by, a.attempt, a.outcome as what, a.settled, a.status, a.error,
         null::text as outcome, 0 as part, a.id as seq
  from punctual_attempts a where a.delivery_id = u.id
  union all
  select 'action', x.delivery_id,
         round(date_part('epoch', date_trunc('milliseconds', x.at)) * 1000), null,
         x.actor, null, x.action, null, null, null, x.outcome, 1, x.id
  from punctual_delivery_actions x where x.delivery_id = u.id
) h
order by u.n, h.part, h.seq`;

/** Result columns of {@link EXPLAIN_HISTORY_SQL}. */
export const EXPLAIN_HISTORY_COLUMNS = columnsOf<ExplainHistoryRow>()([
  "kind",
  "delivery_id",
  "at_ms",
  "ended_ms",
  "by",
  "attempt",
  "what",
  "settled",
  "status",
  "error",
  "outcome",
]);

/** Runs {@link EXPLAIN_HISTORY_SQL}. */
export function explainHistory(
  db: Queryable,
  p: { deliveryIds: readonly number[] },
): Promise<ExplainHistoryRow[]> {
  if (p.deliveryIds.length === 0) return Promise.resolve([]);
  return rows<ExplainHistoryRow>(db, EXPLAIN_HISTORY_SQL, [p.deliveryIds]);
}

/**
 * What holds a tenant's waiting deliveries back now (OPS-16): a circuit of a target host
 * that is not closed (CH-7; `until` its next probe) or a rate-limit bucket without a whole
 * token (DEL-13; `until` the instant its next token accrues).
 */
export interface ExplainHoldRow {
  kind: "circuit" | "limit";
  /** The host (`circuit`) or the limiter `tenant/key` (`limit`). */
  name: string;
  until_ms: number;
}

/**
 * OPS-16: {@link ExplainHoldRow}s of tenant `$2` among hosts `$3` (text[]) and limiters
 * `$4` (text[], `tenant/key`). Both read a primary key; neither reads a delivery row.
 * The next token of a bucket: `tokens` is as of `refilled_at` (in the future while the
 * bucket owes paced tokens, src/store/rate-limits.ts), so it accrues `(1 − tokens now) /
 * rate` seconds after the later of now and `refilled_at`. $1 now (NULL: the database clock).
 */
export const EXPLAIN_HOLDS_SQL = `
select 'circuit' as kind, c.host as name,
       round(date_part('epoch', date_trunc('milliseconds', c.retry_at)) * 1000) as until_ms
from punctual_tenant_circuits c
where c.tenant = $2 and c.host = any($3::text[]) and c.state <> 'closed'
union all
select 'limit', l.tenant || '/' || l.key,
       round(date_part('epoch', date_trunc('milliseconds',
         greatest(${NOW}, l.refilled_at)
           + make_interval(secs => (1 - ${TOKENS_NOW("l")}) / l.rate_per_second))) * 1000)
from punctual_rate_limits l
where l.tenant = $2 and l.tenant || '/' || l.key = any($4::text[]) and ${TOKENS_NOW("l")} < 1`;

/** Result columns of {@link EXPLAIN_HOLDS_SQL}. */
export const EXPLAIN_HOLDS_COLUMNS = columnsOf<ExplainHoldRow>()(["kind", "name", "until_ms"]);

/** Runs {@link EXPLAIN_HOLDS_SQL}; nothing to read when there are neither hosts nor limiters. */
export function explainHolds(
  db: Queryable,
  p: { now: Date | null; tenant: string; hosts: readonly string[]; limiters: readonly string[] },
): Promise<ExplainHoldRow[]> {
  if (p.hosts.length === 0 && p.limiters.length === 0) return Promise.resolve([]);
  return rows<ExplainHoldRow>(db, EXPLAIN_HOLDS_SQL, [p.now, p.tenant, p.hosts, p.limiters]);
}

/**
 * DEL-12 / OPS-16: records an operator's redrive or resolve of deliveries, in the
 * transaction of the action (one row per delivery). $1 now (NULL: the database clock),
 * $2 delivery ids (bigint[]), $3 action, $4 outcome (NULL for a redrive), $5 actor.
 */
export const RECORD_DELIVERY_ACTIONS_SQL = `
insert into punctual_delivery_actions (delivery_id, action, outcome, actor, at)
select u.id, $3, $4, $5, ${NOW}
from unnest($2::bigint[]) as u(id)`;

/** Runs {@link RECORD_DELIVERY_ACTIONS_SQL}. */
export async function recordDeliveryActions(
  db: Queryable,
  p: {
    now: Date | null;
    deliveryIds: readonly number[];
    action: "redrive" | "resolve";
    outcome: "sent" | "dead" | null;
    actor: string;
  },
): Promise<void> {
  if (p.deliveryIds.length === 0) return;
  await db.query(RECORD_DELIVERY_ACTIONS_SQL, [p.now, p.deliveryIds, p.action, p.outcome, p.actor]);
}

/** Debounce state of a schedule (migration 0042, API-9): when its current burst began. */
export interface DebounceRow {
  schedule_id: string;
  burst_started_at: Date;
}

/**
 * DEL-18: the debounce state of a schedule. $1 schedule id.
 */
export const DEBOUNCE_STATE_SQL = `
select schedule_id, burst_started_at from punctual_debounces where schedule_id = $1::uuid`;

/** Result columns of {@link DEBOUNCE_STATE_SQL}. */
export const DEBOUNCE_STATE_COLUMNS = columnsOf<DebounceRow>()(["schedule_id", "burst_started_at"]);

/** Runs {@link DEBOUNCE_STATE_SQL}; null when no burst was recorded. */
export async function debounceState(
  db: Queryable,
  p: { scheduleId: string },
): Promise<DebounceRow | null> {
  const found = await rows<DebounceRow>(db, DEBOUNCE_STATE_SQL, [p.scheduleId]);
  return found[0] ?? null;
}

/**
 * DEL-18: records that a new debounced burst of a schedule began at `$2` (nothing when
 * the schedule is gone: a purge between the read and this write).
 * $1 schedule id, $2 burst start.
 */
export const START_DEBOUNCE_BURST_SQL = `
insert into punctual_debounces (schedule_id, burst_started_at)
select s.id, $2::timestamptz from punctual_schedules s where s.id = $1::uuid
on conflict (schedule_id) do update set burst_started_at = excluded.burst_started_at`;

/** Runs {@link START_DEBOUNCE_BURST_SQL}. */
export async function startDebounceBurst(
  db: Queryable,
  p: { scheduleId: string; startedAt: Date },
): Promise<void> {
  await db.query(START_DEBOUNCE_BURST_SQL, [p.scheduleId, p.startedAt]);
}
