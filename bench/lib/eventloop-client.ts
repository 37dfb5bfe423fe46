/**
 * Load and probes for bench/eventloop.ts (forked over IPC; not run by hand).
 *
 *   argv[2]: JSON { url, rules, events, seed }
 *
 * Phase "rules": the fuzz's random recurrence inputs, every one through POST /v1/preview
 * and every 50th through POST /v1/schedules, 4 requests in flight. Phase "import": one
 * POST /v1/imports of a calendar of `events` events. Throughout, GET /healthz every 25 ms
 * (one at a time), latency measured here. Messages to the parent: { type: "start" } and
 * { type: "end", phase, result } around each phase, then { type: "done" }.
 */
import { Agent, fetch as undiciFetch } from "undici";
import { largeCalendar, prng, randomRecurrence } from "../../scripts/fuzz/inputs.js";

const args = JSON.parse(process.argv[2] ?? "{}") as {
  url: string;
  rules: number;
  events: number;
  seed: number;
};
const send = (m: unknown): Promise<void> =>
  new Promise((resolve) => (process.send ? process.send(m, () => resolve()) : resolve()));

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

async function phase(name: string, load: (count: (status: number) => void) => Promise<void>) {
  await send({ type: "start" });
  const statuses: Record<string, number> = {};
  let requests = 0;
  const count = (status: number): void => {
    requests++;
    const k = `${Math.floor(status / 100)}xx`;
    statuses[k] = (statuses[k] ?? 0) + 1;
  };
  const latencies: number[] = [];
  let running = true;
  const probe = (async () => {
    while (running) {
      const t = performance.now();
      const res = await fetch(`${args.url}/healthz`);
      await res.arrayBuffer();
      latencies.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  const started = performance.now();
  await load(count);
  const seconds = (performance.now() - started) / 1000;
  running = false;
  await probe;
  latencies.sort((a, b) => a - b);
  await send({
    type: "end",
    phase: name,
    result: {
      phase: name,
      requests,
      statuses,
      seconds,
      healthz: {
        samples: latencies.length,
        p50: quantile(latencies, 0.5),
        p99: quantile(latencies, 0.99),
        max: latencies.at(-1) ?? 0,
        over100: latencies.filter((l) => l > 100).length,
      },
    },
  });
}

// A 50,000-event import answers after minutes on a loaded machine: no header or body
// timeout for the load's requests (the /healthz probe keeps the default).
const patient = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
const post = async (path: string, body: string, type: string): Promise<number> => {
  const res = await undiciFetch(`${args.url}${path}`, {
    method: "POST",
    headers: { "content-type": type },
    body,
    dispatcher: patient,
  });
  await res.arrayBuffer();
  return res.status;
};

await phase(`fuzz of ${args.rules} rules`, async (count) => {
  const rand = prng(args.seed);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < args.rules) {
      const i = next++;
      const input = randomRecurrence(rand);
      count(await post("/v1/preview", JSON.stringify({ ...input, count: 10 }), "application/json"));
      if (i % 50 === 0) {
        const body = {
          ...input,
          payload: { i },
          reminders: [{ offset: "-PT15M", channel: "log" }],
        };
        count(await post("/v1/schedules", JSON.stringify(body), "application/json"));
      }
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
});

const calendar = largeCalendar(prng(args.seed + 1), args.events);
await phase(
  `import of ${args.events} events (${(calendar.length / 1e6).toFixed(1)} MB)`,
  async (count) => {
    count(
      await post(`/v1/imports?source=bench&remind=-PT15M&channel=log`, calendar, "text/calendar"),
    );
  },
);
await send({ type: "done" });
process.exit(0);
