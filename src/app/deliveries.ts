/**
 * Deliveries (DEL-1, DEL-12, DEL-14): list, read with attempts, redrive and resolve.
 * Each operation takes the {@link AppContext} of a running punctual.
 */
import {
  LIST_ERROR_MAX_CHARS,
  listDeliveriesQuerySchema,
  type AttemptView,
  type DeliveryView,
} from "../contracts/index.js";
import { ConflictError, NotFoundError, ValidationError } from "../errors/index.js";
import {
  attemptsOf,
  countDeliveryRows,
  deliveryById,
  type ListTotal,
  listDeliveryRows,
  toAttemptView,
  toDeliveryView,
} from "../store/schedules.js";
import { redriveDeliveryRow, resolveDeliveryRow } from "../store/deliveries/index.js";
import { recordDeliveryActions } from "../store/explain.js";
import type { Queryable } from "../store/database.js";
import { tenantOf, type AppContext, type CallContext } from "./context.js";
import { cursorPart, decodeCursor, encodeCursor, type CursorScope } from "./cursor.js";
import { checkWindow, parseInput } from "./input.js";

/** One page of deliveries (API-3): the items, the cursor of the next page (null at the end). */
export interface DeliveryPage {
  items: DeliveryView[];
  nextCursor: string | null;
  /** The last item's id, for `after` (null at the end). */
  nextAfter: number | null;
  /** With `total=true`: how many match (exact up to a bound, else an estimate). */
  total?: ListTotal;
}

/**
 * Lists deliveries (DEL-1, API-3) by id: `order` `asc` (oldest first, the default) or
 * `desc` (newest first), filtered by `scheduleId`, `state` (`dead`: the dead letters),
 * `source`, `channel` and the due time in [`dueFrom`, `dueTo`), one keyset page of
 * `limit` rows. `nextCursor` (null on the last page) continues the same order and filters;
 * `nextAfter` is the older form (the last id, for `after`). With `total`, also how many
 * deliveries the filters match (exact up to 10,000, else the planner's estimate). A
 * `lastError` longer than {@link LIST_ERROR_MAX_CHARS} is cut there and marked
 * `lastErrorTruncated` (API-3); {@link getDelivery} shows it as stored.
 * @throws ValidationError a bad query field, or a `cursor` of another order or filter set.
 */
export async function listDeliveries(
  app: AppContext,
  query: unknown = {},
  ctx: CallContext = {},
): Promise<DeliveryPage> {
  const q = parseInput(listDeliveriesQuerySchema, query);
  checkWindow(q.dueFrom, q.dueTo, ["dueFrom", "dueTo"]);
  const scope: CursorScope = {
    list: "deliveries",
    order: q.order,
    scheduleId: q.scheduleId,
    state: q.state,
    source: q.source,
    channel: q.channel,
    dueFrom: q.dueFrom === undefined ? undefined : new Date(q.dueFrom).toISOString(),
    dueTo: q.dueTo === undefined ? undefined : new Date(q.dueTo).toISOString(),
  };
  let afterId = q.after ?? null;
  if (q.cursor !== undefined) {
    if (afterId !== null) {
      throw new ValidationError({ field: "after", message: "give cursor or after, not both" });
    }
    afterId = decodeCursor(q.cursor, scope, [cursorPart.id])[0] as number;
  }
  const rows = await listDeliveryRows(app.db, {
    tenant: tenantOf(ctx),
    scheduleId: q.scheduleId ?? null,
    state: q.state ?? null,
    afterId,
    limit: q.limit,
    newest: q.order === "desc",
    source: q.source ?? null,
    channel: q.channel ?? null,
    dueFrom: q.dueFrom ?? null,
    dueTo: q.dueTo ?? null,
    errorMaxChars: LIST_ERROR_MAX_CHARS,
  });
  const last = rows.length === q.limit ? rows[rows.length - 1] : undefined;
  return {
    items: rows.map(toDeliveryView),
    nextCursor: last ? encodeCursor([Number(last.id)], scope) : null,
    nextAfter: last ? Number(last.id) : null,
    ...(q.total
      ? {
          total: await countDeliveryRows(app.db, {
            tenant: tenantOf(ctx),
            scheduleId: q.scheduleId ?? null,
            state: q.state ?? null,
            source: q.source ?? null,
            channel: q.channel ?? null,
            dueFrom: q.dueFrom ?? null,
            dueTo: q.dueTo ?? null,
          }),
        }
      : {}),
  };
}

/** A delivery with its attempt history (DEL-12, DEL-14). @throws NotFoundError */
export async function getDelivery(
  app: AppContext,
  id: number,
  ctx: CallContext = {},
): Promise<DeliveryView & { attempts: AttemptView[] }> {
  const row = await deliveryById(app.db, { tenant: tenantOf(ctx), id });
  if (!row) throw new NotFoundError("delivery", String(id));
  const attempts = await attemptsOf(app.db, { deliveryId: id });
  return { ...toDeliveryView(row), attempts: attempts.map(toAttemptView) };
}

/**
 * OPS-16: runs `change` (an operator's redrive or resolve) in one transaction and records,
 * in that same transaction, `action` with its `outcome` by the caller's actor (default
 * `library`) on each delivery it changed.
 * @returns the rows `change` changed.
 */
export function recordedAction<R extends { id: number | string }>(
  app: AppContext,
  ctx: CallContext,
  action: "redrive" | "resolve",
  outcome: "sent" | "dead" | null,
  change: (tx: Queryable) => Promise<R[]>,
): Promise<R[]> {
  return app.db.transaction(async (tx) => {
    const done = await change(tx);
    await recordDeliveryActions(tx, {
      now: app.now(),
      deliveryIds: done.map((r) => Number(r.id)),
      action,
      outcome,
      actor: ctx.actor ?? "library",
    });
    return done;
  });
}

/** The row of a single action, as {@link recordedAction} takes it: none or one. */
const oneRow = <R>(row: R | null): R[] => (row ? [row] : []);

/** DEL-12: sends a dead or in-doubt delivery again, with the same delivery key. */
export async function redriveDelivery(
  app: AppContext,
  id: number,
  ctx: CallContext = {},
): Promise<DeliveryView> {
  const [row] = await recordedAction(app, ctx, "redrive", null, async (tx) =>
    oneRow(await redriveDeliveryRow(tx, { now: app.now(), tenant: tenantOf(ctx), id })),
  );
  if (!row) {
    const current = await getDelivery(app, id, ctx);
    throw new ConflictError(
      current.state === "dead" || current.state === "in_doubt"
        ? `delivery ${id} cannot be redriven: its schedule is cancelled or its reminder "${current.reminderKey}" was removed`
        : `delivery ${id} is in state "${current.state}"; only dead or in_doubt deliveries can be redriven`,
    );
  }
  app.wake();
  return toDeliveryView(row);
}

/** DEL-12: an operator settles an in-doubt delivery as `sent` or `dead`. */
export async function resolveDelivery(
  app: AppContext,
  id: number,
  outcome: "sent" | "dead",
  ctx: CallContext = {},
): Promise<DeliveryView> {
  const [row] = await recordedAction(app, ctx, "resolve", outcome, async (tx) =>
    oneRow(
      await resolveDeliveryRow(tx, {
        now: app.now(),
        tenant: tenantOf(ctx),
        id,
        outcome,
      }),
    ),
  );
  if (!row) {
    const current = await getDelivery(app, id, ctx);
    throw new ConflictError(
      `delivery ${id} is in state "${current.state}"; only in_doubt deliveries and open dead letters can be resolved`,
    );
  }
  return toDeliveryView(row);
}
