import { DefaultLogger, NativeConnection, Runtime, makeTelemetryFilterString, type RuntimeOptions } from '@temporalio/worker';

let runtimeInstalled = false;

/**
 * Temporal's runtime, once per process, before any native connection or worker: by
 * default its own logs at WARN (DEBUG when LOG_LEVEL is debug or trace); tests install
 * theirs first.
 */
export function installRuntime(options: RuntimeOptions): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  Runtime.install(options);
}

/**
 * `metricsAddress` (host:port, from TEMPORAL_METRICS_PORT): the SDK's own worker metrics
 * (task slots, poll and schedule-to-start latencies, sticky cache), served by the SDK's
 * Prometheus exporter at http://<address>/metrics, durations in seconds.
 */
export const runtimeOptions = (level: string, metricsAddress?: string): RuntimeOptions => ({
  logger: new DefaultLogger(level === 'debug' || level === 'trace' ? 'DEBUG' : 'WARN'),
  telemetryOptions: {
    logging: { filter: makeTelemetryFilterString({ core: 'WARN' }) },
    ...(metricsAddress ? { metrics: { prometheus: { bindAddress: metricsAddress, useSecondsForDurations: true } } } : {}),
  },
});

/** A worker process's runtime from its settings (worker/main.ts, npm start): before its first connection. */
export function installRuntimeFor(config: { LOG_LEVEL: string; METRICS_HOST: string; TEMPORAL_METRICS_PORT?: number }): void {
  const host = config.METRICS_HOST.includes(':') ? `[${config.METRICS_HOST}]` : config.METRICS_HOST;
  installRuntime(runtimeOptions(config.LOG_LEVEL, config.TEMPORAL_METRICS_PORT ? `${host}:${config.TEMPORAL_METRICS_PORT}` : undefined));
}

/**
 * The worker's connection to the Temporal frontend (the runtime installed first). A
 * process that runs a worker builds its Client on this same connection
 * (app/compose.ts): a workflow started with `requestEagerStart` is then handed to
 * this process's worker in the start call's answer, with no task-queue round trip.
 */
export async function connectWorker(address: string, logLevel: string): Promise<NativeConnection> {
  installRuntime(runtimeOptions(logLevel));
  return NativeConnection.connect({ address });
}
