/**
 * OPS-15: the OpenTelemetry SDK that `punctual start --otel` and `punctual worker --otel`
 * start: traces and metrics exported over OTLP/HTTP (JSON) to the collector the standard
 * variables name (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the per-signal
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, with
 * `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
 * `OTEL_METRIC_EXPORT_INTERVAL` in ms). The SDK packages load only here, on demand: a
 * process started without `--otel` never imports them.
 *
 * Metrics: every instrument of the process's Prometheus registry is also exported through
 * OTel under the same name (counters as observable counters, gauges as observable gauges,
 * a histogram as its `_count` and `_sum` counters), read from the registry at each export,
 * so `/metrics` and the OTLP stream never disagree.
 */
import { metrics, type Attributes, type Meter } from "@opentelemetry/api";
import type { Registry } from "prom-client";

/** A started SDK: bridge a registry's metrics, flush and stop. */
export interface OtelSdk {
  /** Exports the instruments of `registry` through OTel too (call once per registry). */
  bridge(registry: Registry): void;
  /** Flushes what is buffered and stops the exporters (on shutdown). Never rejects. */
  shutdown(): Promise<void>;
  /** Where traces go (for the startup line). */
  readonly endpoint: string;
}

/** The variables that name a traces endpoint, in the order the exporters read them. */
const ENDPOINT_VARS = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/** The OTLP endpoint named by the environment, or null when none is set. */
export function otlpEndpoint(env: NodeJS.ProcessEnv): string | null {
  for (const name of ENDPOINT_VARS) {
    const value = env[name]?.trim();
    if (value) return value;
  }
  return null;
}

/**
 * Starts the SDK: a global tracer provider (W3C Trace Context propagation, batch export)
 * and a global meter provider (periodic export). Returns null, starting nothing, when no
 * OTLP endpoint is set.
 * @param serviceVersion `service.version` of the resource.
 */
export async function startOtelSdk(
  env: NodeJS.ProcessEnv,
  serviceVersion: string,
): Promise<OtelSdk | null> {
  const endpoint = otlpEndpoint(env);
  if (endpoint === null) return null;
  const [traceSdk, traceExporter, metricSdk, metricExporter, resources] = await Promise.all([
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/sdk-metrics"),
    import("@opentelemetry/exporter-metrics-otlp-http"),
    import("@opentelemetry/resources"),
  ]);
  const resource = resources
    .defaultResource()
    .merge(
      resources.resourceFromAttributes({
        "service.name": env.OTEL_SERVICE_NAME?.trim() || "punctual",
        "service.version": serviceVersion,
      }),
    )
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const tracerProvider = new traceSdk.NodeTracerProvider({
    resource,
    spanProcessors: [new traceSdk.BatchSpanProcessor(new traceExporter.OTLPTraceExporter())],
  });
  tracerProvider.register();
  const interval = Number(env.OTEL_METRIC_EXPORT_INTERVAL);
  const meterProvider = new metricSdk.MeterProvider({
    resource,
    readers: [
      new metricSdk.PeriodicExportingMetricReader({
        exporter: new metricExporter.OTLPMetricExporter(),
        exportIntervalMillis: Number.isFinite(interval) && interval >= 1_000 ? interval : 60_000,
      }),
    ],
  });
  metrics.setGlobalMeterProvider(meterProvider);
  return {
    endpoint,
    bridge: (registry) => bridgeRegistry(registry, meterProvider.getMeter("punctual")),
    shutdown: async () => {
      await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}

/** A Prometheus label set as OTel attributes (prom-client's values are strings or numbers). */
function attributesOf(labels: Partial<Record<string, string | number>> | undefined): Attributes {
  const attributes: Attributes = {};
  for (const [k, v] of Object.entries(labels ?? {})) if (v !== undefined) attributes[k] = v;
  return attributes;
}

/**
 * Exports each instrument of `registry` through `meter`, read from the registry at each
 * collection (one batch callback, so one read per export).
 */
export function bridgeRegistry(registry: Registry, meter: Meter): void {
  type Observable = Parameters<Meter["addBatchObservableCallback"]>[1][number];
  const instruments = new Map<string, Observable>();
  for (const metric of registry.getMetricsAsArray()) {
    const { name, help, type } = metric as unknown as { name: string; help: string; type: string };
    if (type === "counter") {
      instruments.set(name, meter.createObservableCounter(name, { description: help }));
    } else if (type === "gauge") {
      instruments.set(name, meter.createObservableGauge(name, { description: help }));
    } else if (type === "histogram") {
      instruments.set(
        `${name}_count`,
        meter.createObservableCounter(`${name}_count`, { description: `${help} (count)` }),
      );
      instruments.set(
        `${name}_sum`,
        meter.createObservableCounter(`${name}_sum`, { description: `${help} (sum)` }),
      );
    }
  }
  meter.addBatchObservableCallback(
    async (observer) => {
      for (const metric of await registry.getMetricsAsJSON()) {
        for (const v of metric.values) {
          const named = (v as { metricName?: unknown }).metricName;
          const key = typeof named === "string" && named !== "" ? named : metric.name;
          const instrument = instruments.get(key);
          if (instrument && Number.isFinite(v.value)) {
            observer.observe(instrument, v.value, attributesOf(v.labels));
          }
        }
      }
    },
    [...instruments.values()],
  );
}
