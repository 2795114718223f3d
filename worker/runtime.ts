import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import type { Config } from '../core/config';
import { openDatabase } from '../core/db/orm';
import { createServices } from '../core/services';
import { ensureSchedules } from './schedules';
import { createWorker } from './worker';

let runtimeInstalled = false;

/** A worker process's pieces: database, Temporal connection, schedules, the worker itself. */
export async function startWorkerRuntime(config: Config, opts: { databaseUrl: string; temporalAddress: string }) {
  if (!runtimeInstalled) {
    runtimeInstalled = true;
    Runtime.install({ logger: new DefaultLogger(config.LOG_LEVEL === 'debug' || config.LOG_LEVEL === 'trace' ? 'DEBUG' : 'WARN'), telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }) } } });
  }
  const orm = await openDatabase(opts.databaseUrl);
  const connection = await NativeConnection.connect({ address: opts.temporalAddress });
  const clientConnection = await Connection.connect({ address: opts.temporalAddress });
  const client = new Client({ connection: clientConnection, namespace: config.TEMPORAL_NAMESPACE });
  await ensureSchedules(client, config.TEMPORAL_TASK_QUEUE);
  const services = createServices(orm.em, { idempotencyTtlHours: config.IDEMPOTENCY_TTL_HOURS });
  const worker = await createWorker({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    deps: { em: orm.em, services },
  });
  const running = worker.run();
  return {
    worker,
    client,
    running,
    close: async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await clientConnection.close();
      await connection.close();
      await orm.close();
    },
  };
}
