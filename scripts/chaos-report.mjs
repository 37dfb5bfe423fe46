// The verdict of `npm run chaos` (scripts/chaos.mjs): a pure function from what was
// created, what the database holds and what the receiver logged, to counts, samples and
// failures. No I/O here, so test/unit/chaos-report.test.ts can feed it made-up runs.
//
// Failures (exit 1): a reminder lost, a receipt before its due time (beyond the
// tolerance), a reminder that reached the receiver (or the database) under a second key,
// a request whose signature did not verify. Re-sends of one key and in_doubt / dead rows
// are counted, never failures: a de-duplicating receiver sees one effect per key.
// Types: scripts/chaos-report.d.mts.

/** States a delivery does not leave on its own. */
export const FINAL_STATES = ["sent", "dead", "in_doubt", "skipped", "cancelled"];

/** States that explain why a reminder never reached the receiver. */
const EXPLAINED = ["dead", "in_doubt", "skipped", "cancelled"];

const SAMPLES = 10;

function quantile(sorted, q) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

const round3 = (x) => (Number.isFinite(x) ? Math.round(x * 1_000) / 1_000 : null);

/**
 * Judges one run.
 * @param {import("./chaos-report.d.mts").AnalyseInput} input
 * @returns {import("./chaos-report.d.mts").Findings}
 */
export function analyse({ reminders, rows, arrivals, earlyToleranceMs, stalledClaim = null }) {
  const byN = new Map(reminders.map((r) => [r.n, r]));
  const nBySchedule = new Map(reminders.map((r) => [r.scheduleId, r.n]));

  const db = {};
  const rowsByN = new Map();
  const rowByKey = new Map();
  for (const row of rows) {
    db[row.state] = (db[row.state] ?? 0) + 1;
    rowByKey.set(row.delivery_key, row);
    const n = nBySchedule.get(row.schedule_id);
    if (n === undefined) continue;
    if (!rowsByN.has(n)) rowsByN.set(n, []);
    rowsByN.get(n).push(row);
  }

  /** webhook-id → attempts seen, in arrival order. */
  const attemptsById = new Map();
  /** reminder number → webhook-ids it arrived under. */
  const keysByN = new Map();
  const firstReceipt = new Map();
  const early = [];
  const badSignatures = [];
  const unknownIds = new Set();
  let dueAtMismatch = 0;
  const skew = { maxAbs: 0, max: -Infinity, min: Infinity, over5s: 0 };

  for (const a of arrivals) {
    if (!a.ok) {
      badSignatures.push(a);
      continue;
    }
    if (!attemptsById.has(a.id)) attemptsById.set(a.id, []);
    attemptsById.get(a.id).push({ attempt: a.attempt, recvMs: a.recvMs });
    if (!rowByKey.has(a.id)) unknownIds.add(a.id);
    const n = a.n ?? nBySchedule.get(a.scheduleId);
    const reminder = n === undefined || n === null ? undefined : byN.get(n);
    if (reminder) {
      if (!keysByN.has(n)) keysByN.set(n, new Set());
      keysByN.get(n).add(a.id);
      if (a.dueAt !== null && a.dueAt !== undefined && Date.parse(a.dueAt) !== reminder.dueAtMs) {
        dueAtMismatch += 1;
      }
      if (a.recvMs < reminder.dueAtMs - earlyToleranceMs) {
        early.push({
          n,
          id: a.id,
          dueAt: new Date(reminder.dueAtMs).toISOString(),
          earlyMs: reminder.dueAtMs - a.recvMs,
          attempt: a.attempt ?? null,
        });
      }
      const prev = firstReceipt.get(n);
      if (prev === undefined || a.recvMs < prev) firstReceipt.set(n, a.recvMs);
    } else {
      unknownIds.add(a.id);
    }
    if (typeof a.ts === "number") {
      const s = a.ts - a.recvMs / 1_000;
      skew.maxAbs = Math.max(skew.maxAbs, Math.abs(s));
      skew.max = Math.max(skew.max, s);
      skew.min = Math.min(skew.min, s);
      if (Math.abs(s) > 5) skew.over5s += 1;
    }
  }

  let resends = 0;
  let keysResent = 0;
  let sameAttempt = 0;
  const sameAttemptSamples = [];
  for (const [id, seen] of attemptsById) {
    if (seen.length < 2) continue;
    keysResent += 1;
    resends += seen.length - 1;
    const repeats = seen.length - new Set(seen.map((x) => x.attempt)).size;
    sameAttempt += repeats;
    if (repeats > 0 && sameAttemptSamples.length < SAMPLES) {
      sameAttemptSamples.push({ id, arrivals: seen });
    }
  }

  const secondKeyAtReceiver = [...keysByN].filter(([, keys]) => keys.size > 1);
  const secondKeyInDatabase = [...rowsByN].filter(([, rs]) => rs.length > 1);

  const lost = { noRow: [], sentNotReceived: [], unsettled: [] };
  const notReceivedExplained = Object.fromEntries(EXPLAINED.map((s) => [s, 0]));
  let inDoubtReceived = 0;
  for (const r of reminders) {
    const rs = rowsByN.get(r.n) ?? [];
    if (keysByN.has(r.n)) {
      inDoubtReceived += rs.filter((row) => row.state === "in_doubt").length;
      continue;
    }
    if (rs.length === 0) {
      lost.noRow.push({ n: r.n, scheduleId: r.scheduleId });
      continue;
    }
    for (const row of rs) {
      const sample = {
        n: r.n,
        deliveryKey: row.delivery_key,
        state: row.state,
        attempt: row.attempt,
        reason: row.reason ?? null,
      };
      if (EXPLAINED.includes(row.state)) notReceivedExplained[row.state] += 1;
      else if (row.state === "sent") lost.sentNotReceived.push(sample);
      else lost.unsettled.push(sample);
    }
  }
  const lostCount = lost.noRow.length + lost.sentNotReceived.length + lost.unsettled.length;

  const lateness = [...firstReceipt].map(([n, t]) => t - byN.get(n).dueAtMs).sort((a, b) => a - b);

  const secondKeys = Math.max(secondKeyAtReceiver.length, secondKeyInDatabase.length);
  const failures = [];
  if (lostCount > 0) failures.push(`${lostCount} lost`);
  if (early.length > 0) failures.push(`${early.length} early`);
  if (secondKeys > 0) failures.push(`${secondKeys} reminders under a second key`);
  if (badSignatures.length > 0) {
    failures.push(`${badSignatures.length} requests with a bad signature`);
  }
  // DEL-16: rows of the claim whose reply the stalled worker read only after their lease
  // had ended; a receipt under that claim's attempt is a send on a lease it no longer held.
  let stalledSends = null;
  if (stalledClaim) {
    const wanted = new Set(stalledClaim.map((r) => `${r.delivery_key}#${r.attempt}`));
    stalledSends = arrivals.filter((a) => a.ok && wanted.has(`${a.id}#${a.attempt}`)).length;
    if (stalledSends > 0) {
      failures.push(`${stalledSends} sends by the stalled worker on leases that had ended`);
    }
  }

  return {
    ok: failures.length === 0,
    failures,
    created: reminders.length,
    deliveries: rows.length,
    stalledSends,
    db,
    sent: db.sent ?? 0,
    received: {
      requests: arrivals.length,
      uniqueIds: attemptsById.size,
      resends,
      keysResent,
      resendsSameAttempt: sameAttempt,
      sameAttemptSamples,
      badSignature: badSignatures.length,
      unknownIds: unknownIds.size,
      dueAtMismatch,
    },
    lost: lostCount,
    lostDetail: {
      noRow: lost.noRow.length,
      sentNotReceived: lost.sentNotReceived.length,
      unsettled: lost.unsettled.length,
      samples: [...lost.noRow, ...lost.sentNotReceived, ...lost.unsettled].slice(0, SAMPLES),
    },
    notReceivedExplained,
    in_doubt: db.in_doubt ?? 0,
    inDoubtReceived,
    dead: db.dead ?? 0,
    early: {
      count: early.length,
      toleranceMs: earlyToleranceMs,
      maxMs: early.reduce((m, e) => Math.max(m, e.earlyMs), 0),
      samples: early.slice(0, SAMPLES),
    },
    secondKey: {
      atReceiver: secondKeyAtReceiver.length,
      inDatabase: secondKeyInDatabase.length,
      samples: [
        ...secondKeyAtReceiver.map(([n, keys]) => ({ n, keys: [...keys] })),
        ...secondKeyInDatabase.map(([n, rs]) => ({ n, keys: rs.map((row) => row.delivery_key) })),
      ].slice(0, SAMPLES),
    },
    badSignatureSamples: badSignatures.slice(0, 5),
    latenessMs: {
      p50: quantile(lateness, 0.5),
      p99: quantile(lateness, 0.99),
      max: lateness.length > 0 ? lateness[lateness.length - 1] : null,
    },
    timestampSkewS: {
      maxAbs: round3(skew.maxAbs),
      max: round3(skew.max),
      min: round3(skew.min),
      requestsOver5s: skew.over5s,
    },
  };
}

/**
 * The report as text, one fact a line, ending with PASS or FAIL and the failures.
 * @param {import("./chaos-report.d.mts").Report} r
 * @returns {string}
 */
export function formatReport(r) {
  const out = [];
  const line = (k, v) => out.push(`  ${k.padEnd(28)} ${v}`);
  out.push("", `chaos report (run ${r.run})`);
  line(
    "created",
    `${r.created}${r.createdAfterDue ? ` (${r.createdAfterDue} after their due time)` : ""}`,
  );
  line("deliveries (rows)", r.deliveries);
  line("sent (database)", r.sent);
  line(
    "webhooks received",
    `${r.received.requests} requests, ${r.received.uniqueIds} unique webhook-ids`,
  );
  line(
    "re-sends (same key)",
    `${r.received.resends} (${r.received.keysResent} keys more than once; ${r.received.resendsSameAttempt} repeated an attempt number)`,
  );
  line(
    "lost",
    `${r.lost} (no row ${r.lostDetail.noRow}, sent but never received ${r.lostDetail.sentNotReceived}, unsettled ${r.lostDetail.unsettled})`,
  );
  line("in_doubt", `${r.in_doubt} (${r.inDoubtReceived} of them received)`);
  line("dead", r.dead);
  line(
    "early",
    `${r.early.count} (tolerance ${r.early.toleranceMs} ms${r.early.count ? `, worst ${r.early.maxMs} ms` : ""})`,
  );
  line(
    "second key per reminder",
    `${r.secondKey.atReceiver} at the receiver, ${r.secondKey.inDatabase} in the database`,
  );
  line("bad signatures", r.received.badSignature);
  line("unknown webhook-ids", r.received.unknownIds);
  line(
    "lateness (first receipt)",
    `p50 ${r.latenessMs.p50} ms, p99 ${r.latenessMs.p99} ms, max ${r.latenessMs.max} ms`,
  );
  line(
    "webhook-timestamp skew",
    `max |ts - receipt| ${r.timestampSkewS.maxAbs} s (range ${r.timestampSkewS.min} … ${r.timestampSkewS.max} s; ${r.timestampSkewS.requestsOver5s} requests over 5 s)`,
  );
  line("database states", JSON.stringify(r.db));
  const c = r.chaos;
  line(
    "chaos",
    `${c.kills} SIGKILLs; ${c.pgRestarts.length} PostgreSQL restarts (${c.pgRestarts.map((p) => `${p.mode} ${p.ms} ms`).join(", ") || "none"}); ` +
      `${c.proxyResets.length} proxy resets (${c.proxyResets.map((p) => p.dropped).join(", ") || "none"} connections); ` +
      `pause ${c.pause ? `${c.pause.ms} ms` : "none"}; skew ${c.skew ? `+${c.skew.seconds} s` : "none"}` +
      (c.killsSkipped ? `; ${c.killsSkipped} kills skipped (fewer than 2 workers running)` : "") +
      (c.skipped.length ? `; did not happen: ${c.skipped.join(", ")}` : ""),
  );
  if (c.pause?.attempts) {
    const a = c.pause.attempts;
    const fenced = a.filter((x) => !x.settled).reduce((sum, x) => sum + x.n, 0);
    line(
      "stopped worker's attempts",
      `${a.reduce((sum, x) => sum + x.n, 0)} recorded, ${fenced} fenced out (lease ended): ` +
        (a.map((x) => `${x.outcome}${x.settled ? "" : " (fenced)"} ${x.n}`).join(", ") || "none"),
    );
  }
  if (c.stall) {
    line(
      "stalled claim",
      c.stall.pid === null
        ? `did not happen: ${c.stall.note}`
        : `worker ${c.stall.pid} stopped ${c.stall.ms} ms with its claim of ${c.stall.claimed} rows in flight; ` +
            `${r.stalledSends ?? 0} of them sent by it afterwards`,
    );
  }
  if (c.pause?.sends) {
    const p = c.pause.sends;
    line(
      "stopped worker's late sends",
      `${p.received} of its ${p.fenced} fenced attempts reached the receiver, ${p.receivedAfterResume} of them after it resumed`,
    );
  }
  line(
    "workers",
    `${r.workers.spawned} started (boot p50 ${r.workers.bootMsP50} ms), ${r.workers.unexpectedExits.length} exited on their own`,
  );
  line(
    "time",
    `create ${r.timing.createS} s, chaos ${r.timing.chaosS} s, settle ${r.timing.settleS} s${r.timing.settled ? "" : " (NOT settled)"}, total ${r.timing.totalS} s`,
  );
  if (r.lostDetail.samples.length) line("lost samples", JSON.stringify(r.lostDetail.samples));
  if (r.early.samples.length) line("early samples", JSON.stringify(r.early.samples));
  if (r.secondKey.samples.length) line("second-key samples", JSON.stringify(r.secondKey.samples));
  if (r.badSignatureSamples.length) {
    line("bad-signature samples", JSON.stringify(r.badSignatureSamples));
  }
  out.push("", r.ok ? "PASS" : `FAIL: ${r.failures.join(", ")}`);
  return out.join("\n") + "\n";
}
