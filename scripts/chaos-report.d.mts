// Types of scripts/chaos-report.mjs (the verdict of `npm run chaos`).

/** One reminder the run created: its number (in the payload), schedule and due time. */
export interface CreatedReminder {
  n: number;
  scheduleId: string;
  /** Due time, epoch ms. */
  dueAtMs: number;
}

/** A row of punctual_deliveries, as the run reads it at the end. */
export interface DeliveryRow {
  delivery_key: string;
  schedule_id: string;
  state: string;
  attempt: number;
  reason: string | null;
}

/** One request the receiver logged (scripts/chaos-receiver.mjs). */
export interface Arrival {
  /** The `webhook-id` header (the delivery key). */
  id: string;
  /** The `webhook-timestamp` header, Unix seconds. */
  ts: number | null;
  /** Receiver's real clock when the request arrived, epoch ms. */
  recvMs: number;
  /** Whether the Standard Webhooks signature verified. */
  ok: boolean;
  dueAt: string | null;
  scheduleId: string | null;
  reminderKey?: string | null;
  /** The reminder's number, from the payload. */
  n: number | null;
  attempt: number | null;
}

export interface AnalyseInput {
  reminders: CreatedReminder[];
  rows: DeliveryRow[];
  arrivals: Arrival[];
  /** A receipt this much before its due time (ms) or more counts as early. */
  earlyToleranceMs: number;
  /**
   * DEL-16: the rows (key and attempt) of the claim a stalled worker read only after their
   * lease had ended; a receipt of any under that attempt is a failure. Null: no stall.
   */
  stalledClaim?: Array<{ delivery_key: string; attempt: number }> | null;
}

export interface Findings {
  ok: boolean;
  failures: string[];
  created: number;
  deliveries: number;
  /** Receipts of the stalled claim's rows under its attempt (must be 0); null: no stall. */
  stalledSends: number | null;
  /** Row count by delivery state. */
  db: Record<string, number>;
  sent: number;
  received: {
    requests: number;
    uniqueIds: number;
    /** Arrivals beyond the first of each webhook-id. */
    resends: number;
    keysResent: number;
    /** Re-sends that carried an attempt number already seen for that key. */
    resendsSameAttempt: number;
    /** Keys that arrived twice with one attempt number: each arrival's attempt and time. */
    sameAttemptSamples: Array<{
      id: string;
      arrivals: Array<{ attempt: number | null; recvMs: number }>;
    }>;
    badSignature: number;
    /** webhook-ids matching no delivery row of the run. */
    unknownIds: number;
    /** Arrivals whose body `dueAt` differs from the reminder's due time. */
    dueAtMismatch: number;
  };
  lost: number;
  lostDetail: {
    noRow: number;
    sentNotReceived: number;
    unsettled: number;
    samples: Array<Record<string, unknown>>;
  };
  notReceivedExplained: Record<string, number>;
  in_doubt: number;
  /** in_doubt rows whose reminder did reach the receiver. */
  inDoubtReceived: number;
  dead: number;
  early: {
    count: number;
    toleranceMs: number;
    maxMs: number;
    samples: Array<{
      n: number;
      id: string;
      dueAt: string;
      earlyMs: number;
      attempt: number | null;
    }>;
  };
  secondKey: {
    atReceiver: number;
    inDatabase: number;
    samples: Array<{ n: number; keys: string[] }>;
  };
  badSignatureSamples: Arrival[];
  latenessMs: { p50: number | null; p99: number | null; max: number | null };
  timestampSkewS: {
    maxAbs: number | null;
    max: number | null;
    min: number | null;
    requestsOver5s: number;
  };
}

/** The full report scripts/chaos.mjs prints: the findings plus what the run did. */
export interface Report extends Findings {
  run: string;
  createdAfterDue: number;
  config: Record<string, unknown>;
  chaos: {
    kills: number;
    pgRestarts: Array<{ atMs: number; mode: string; ms: number; ok: boolean }>;
    proxyResets: Array<{ atMs: number; dropped: number | null }>;
    /** Runs a kill was due with fewer than two workers running (none was killed). */
    killsSkipped: number;
    pause: {
      pid: number;
      slot: number;
      atMs: number;
      ms: number;
      /** The stopped worker's recorded attempts by outcome; null when unreadable. */
      attempts: Array<{ outcome: string; settled: boolean; n: number }> | null;
      /**
       * Its fenced attempts (outcome recorded after its lease ended), how many of them
       * reached the receiver, and how many arrived after the worker was resumed.
       */
      sends: { fenced: number; received: number; receivedAfterResume: number } | null;
    } | null;
    skew: { seconds: number; slot: number } | null;
    skipped: string[];
  };
  workers: {
    spawned: number;
    bootMsP50: number | null;
    unexpectedExits: Array<Record<string, unknown>>;
  };
  timing: {
    createS: number;
    chaosS: number;
    settleS: number;
    settled: boolean;
    totalS: number;
  };
}

export const FINAL_STATES: readonly string[];
export function analyse(input: AnalyseInput): Findings;
export function formatReport(report: Report): string;
