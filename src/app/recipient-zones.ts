/**
 * API-11: `GET /v1/schedules/{id}/recipient-zones` — the zones of a schedule's recipients,
 * each with how many recipients are in it, and whether the schedule is floating (its
 * DTSTART and RRULE read in each recipient's zone). The dashboard shows a schedule's next
 * occurrence per recipient zone from it (one preview per zone).
 */
import { NotFoundError } from "../errors/index.js";
import { recipientZones, scheduleAudience } from "../store/recipient-zones.js";
import { scheduleById } from "../store/schedules.js";
import { tenantOf, type AppContext, type CallContext } from "./context.js";

/** The answer of `GET /v1/schedules/{id}/recipient-zones`. */
export interface RecipientZones {
  scheduleId: string;
  /** True when DTSTART and the rule are read in each recipient's own zone (RFC 5545 floating time). */
  floating: boolean;
  /** Recipients of the schedule; 0 for a schedule without recipients. */
  recipients: number;
  /** The recipients' IANA zones, most recipients first (then by name); at most 1,000. */
  zones: { tzid: string; recipients: number }[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The zones of schedule `id`'s recipients (API-11), in the caller's tenant. A schedule
 * without recipients answers `recipients: 0` and no zones.
 * @throws NotFoundError when the tenant has no schedule `id`
 */
export async function scheduleRecipientZones(
  app: AppContext,
  id: string,
  ctx: CallContext = {},
): Promise<RecipientZones> {
  const tenant = tenantOf(ctx);
  if (!UUID.test(id)) throw new NotFoundError("schedule", id);
  const schedule = await scheduleById(app.db, { tenant, id });
  if (!schedule) throw new NotFoundError("schedule", id);
  const audience = await scheduleAudience(app.db, { scheduleId: id, tenant });
  if (!audience) return { scheduleId: id, floating: false, recipients: 0, zones: [] };
  const zones = await recipientZones(app.db, { scheduleId: id, tenant });
  return {
    scheduleId: id,
    floating: audience.floating,
    recipients: Number(audience.recipients),
    zones: zones.map((z) => ({ tzid: z.tzid, recipients: Number(z.recipients) })),
  };
}
