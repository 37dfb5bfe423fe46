/**
 * Deliveries (DEL-1, DEL-12, DEL-14): list, read with attempts, redrive and resolve.
 * Each operation takes the {@link AppContext} of a running punctual.
 */
import {
  listDeliveriesQuerySchema,
  type AttemptView,
  type DeliveryView,
} from "../contracts/index.js";
import { ConflictError, NotFoundError } from "../errors/index.js";
import {
  attemptsOf,
  deliveryById,
  listDeliveryRows,
  redriveDeliveryRow,
  resolveDeliveryRow,
  toAttemptView,
  toDeliveryView,
} from "../store/schedules.js";
import { DEFAULT_TENANT, type AppContext, type CallContext } from "./context.js";
import { parseInput } from "./input.js";

/** Lists deliveries (DEL-1), by id, with keyset pagination (`after`). */
export async function listDeliveries(
  app: AppContext,
  query: unknown = {},
  ctx: CallContext = {},
): Promise<{ items: DeliveryView[]; nextAfter: number | null }> {
  const q = parseInput(listDeliveriesQuerySchema, query);
  const rows = await listDeliveryRows(app.db, {
    tenant: ctx.tenant ?? DEFAULT_TENANT,
    scheduleId: q.scheduleId ?? null,
    state: q.state ?? null,
    afterId: q.after ?? null,
    limit: q.limit,
  });
  const last = rows[rows.length - 1];
  return {
    items: rows.map(toDeliveryView),
    nextAfter: last && rows.length === q.limit ? last.id : null,
  };
}

/** A delivery with its attempt history (DEL-12, DEL-14). @throws NotFoundError */
export async function getDelivery(
  app: AppContext,
  id: number,
  ctx: CallContext = {},
): Promise<DeliveryView & { attempts: AttemptView[] }> {
  const row = await deliveryById(app.db, { tenant: ctx.tenant ?? DEFAULT_TENANT, id });
  if (!row) throw new NotFoundError("delivery", String(id));
  const attempts = await attemptsOf(app.db, { deliveryId: id });
  return { ...toDeliveryView(row), attempts: attempts.map(toAttemptView) };
}

/** DEL-12: sends a dead or in-doubt delivery again, with the same delivery key. */
export async function redriveDelivery(
  app: AppContext,
  id: number,
  ctx: CallContext = {},
): Promise<DeliveryView> {
  const row = await redriveDeliveryRow(app.db, {
    now: app.now(),
    tenant: ctx.tenant ?? DEFAULT_TENANT,
    id,
  });
  if (!row) {
    const current = await getDelivery(app, id, ctx);
    throw new ConflictError(
      current.state === "dead" || current.state === "in_doubt"
        ? `delivery ${id} cannot be redriven: its schedule is cancelled or its reminder "${current.reminderKey}" was removed`
        : `delivery ${id} is ${current.state}; only dead or in_doubt deliveries can be redriven`,
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
  const row = await resolveDeliveryRow(app.db, {
    now: app.now(),
    tenant: ctx.tenant ?? DEFAULT_TENANT,
    id,
    outcome,
  });
  if (!row) {
    const current = await getDelivery(app, id, ctx);
    throw new ConflictError(
      `delivery ${id} is ${current.state}; only in_doubt deliveries and open dead letters can be resolved`,
    );
  }
  return toDeliveryView(row);
}
