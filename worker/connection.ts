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

export const runtimeOptions = (level: string): RuntimeOptions => ({
  logger: new DefaultLogger(level === 'debug' || level === 'trace' ? 'DEBUG' : 'WARN'),
  telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }) } },
});

/**
 * The worker's connection to the Temporal frontend (the runtime installed first). A
 * process that runs a worker builds its Client on this same connection
 * (core/compose.ts): a workflow started with `requestEagerStart` is then handed to
 * this process's worker in the start call's answer, with no task-queue round trip.
 */
export async function connectWorker(address: string, logLevel: string): Promise<NativeConnection> {
  installRuntime(runtimeOptions(logLevel));
  return NativeConnection.connect({ address });
}
