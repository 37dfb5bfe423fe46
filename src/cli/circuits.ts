/**
 * `punctual circuits` (CH-7) and `punctual metrics` (OPS-13), through the running server:
 * the caller's tenant's circuits of `GET /v1/circuits` (one per tenant and target host), and the Prometheus text of `GET /metrics`
 * (as it is, or with `--json` as `[{ name, labels, value }]` samples for scripts).
 */
import type { Command } from "commander";
import type { CircuitView } from "../contracts/rate-limits.js";
import { jsonText, table } from "./format.js";
import type { CommandKit } from "./rate-limits.js";
import { clientFor, type RemoteFlags } from "./remote.js";
import type { Io } from "./run.js";

/** `circuits`: the caller's tenant's circuit of each troubled host, as the API lists them. */
export async function circuitsList(flags: RemoteFlags, io: Io): Promise<void> {
  const page = await clientFor(flags).get<{ items: CircuitView[] }>("/v1/circuits");
  if (flags.json) return io.out(jsonText(page));
  io.out(
    page.items.length
      ? table(page.items, [
          { header: "HOST", cell: (c) => c.host },
          { header: "STATE", cell: (c) => c.state },
          { header: "FAILURES", cell: (c) => c.failures },
          { header: "BACKOFF MS", cell: (c) => c.backoffMs },
          { header: "NEXT PROBE", cell: (c) => c.retryAt },
          { header: "OPENED", cell: (c) => c.openedAt },
        ])
      : "No circuits: no target host has failed.\n",
  );
}

/** One sample of the Prometheus text format. */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  /** The value as a number (`NaN`, `+Inf` and `-Inf` as the strings Prometheus writes). */
  value: number | string;
}

/**
 * Reads the samples of a Prometheus text exposition (comments and blank lines skipped).
 * Label values are unescaped (`\\`, `\"`, `\n`). Lines that are not samples are skipped.
 */
export function parseMetrics(text: string): MetricSample[] {
  const samples: MetricSample[] = [];
  for (const line of text.split("\n")) {
    const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?\s*$/.exec(line);
    if (!m || line.startsWith("#")) continue;
    const labels: Record<string, string> = {};
    const labelText = m[2] ?? "";
    for (const l of labelText.matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    }
    const raw = m[3]!;
    const n = Number(raw);
    samples.push({ name: m[1]!, labels, value: Number.isFinite(n) ? n : raw });
  }
  return samples;
}

/** `metrics`: the server's `/metrics` text, or its samples as JSON. */
export async function metricsShow(flags: RemoteFlags, io: Io): Promise<void> {
  const reply = await clientFor(flags).request<string>("GET", "/metrics", {
    headers: { accept: "text/plain" },
  });
  const text = typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body);
  if (flags.json) return io.out(jsonText(parseMetrics(text)));
  io.out(text.endsWith("\n") ? text : `${text}\n`);
}

/** Adds `circuits` and `metrics` to `program`. */
export function addInspectCommands(program: Command, kit: CommandKit): void {
  const { io, remoteOptions, example } = kit;
  remoteOptions(
    program
      .command("circuits")
      .description(
        "This tenant's circuits of webhook and chat target hosts: open, half-open, or counting failures.",
      ),
  )
    .addHelpText("after", example(["punctual circuits", "punctual circuits --json"]))
    .action((flags: RemoteFlags) => circuitsList(flags, io));
  remoteOptions(
    program
      .command("metrics")
      .description("The server's Prometheus metrics (GET /metrics); --json prints the samples."),
  )
    .addHelpText(
      "after",
      example(["punctual metrics | grep punctual_deliveries_total", "punctual metrics --json"]),
    )
    .action((flags: RemoteFlags) => metricsShow(flags, io));
}
