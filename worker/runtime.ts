import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import pino from 'pino';
import type { Config } from '../core/config';
import { openSecretBox } from '../core/crypto/encryption-key';
import { openDatabase } from '../core/db/orm';
import { createServices, serviceOptionsFromConfig } from '../core/services';
import { IndexingService } from '../core/kb/indexing';
import { extractorFromConfig } from '../core/kb/extractor';
import { OutboxDispatcher } from './outbox-dispatcher';
import { kbIndexing, webhookDeliveries } from './outbox-sources';
import { ensureSchedules } from './schedules';
import { ensureSearchAttributes } from './search-attributes';
import { createWorker } from './worker';

let runtimeInstalled = false;

/** A worker process's pieces: database, Temporal connection, schedules, the outbox relay, the worker itself. */
export async function startWorkerRuntime(config: Config, opts: { databaseUrl: string; temporalAddress: string; embedded: boolean }) {
  if (!runtimeInstalled) {
    runtimeInstalled = true;
    Runtime.install({
      logger: new DefaultLogger(config.LOG_LEVEL === 'debug' || config.LOG_LEVEL === 'trace' ? 'DEBUG' : 'WARN'),
      telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }) } },
    });
  }
  const log = pino({ level: config.LOG_LEVEL });
  const orm = await openDatabase(opts.databaseUrl);
  // The key first: a worker that cannot open (or must not generate) it stops before touching Temporal.
  const box = await openSecretBox(config, orm.em, { embedded: opts.embedded });
  const connection = await NativeConnection.connect({ address: opts.temporalAddress });
  const clientConnection = await Connection.connect({ address: opts.temporalAddress });
  const client = new Client({ connection: clientConnection, namespace: config.TEMPORAL_NAMESPACE });
  await ensureSearchAttributes(clientConnection, config.TEMPORAL_NAMESPACE);
  await ensureSchedules(client, config.TEMPORAL_TASK_QUEUE);
  const serviceOptions = serviceOptionsFromConfig(config, { box });
  const services = createServices(orm.em, serviceOptions);
  const indexing = new IndexingService({ em: orm.em, blobs: serviceOptions.blobs, extract: extractorFromConfig(config), embedder: serviceOptions.embedder });
  const worker = await createWorker({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    deps: { em: orm.em, services, indexing },
  });
  const running = worker.run();
  const taskQueue = config.TEMPORAL_TASK_QUEUE;
  const dispatcher = new OutboxDispatcher(
    opts.databaseUrl,
    [
      webhookDeliveries(services.deliveries, client, { taskQueue, backoffMs: config.CONCIERGE_WEBHOOK_BACKOFF_MS, timeoutMs: config.CONCIERGE_WEBHOOK_TIMEOUT_MS }),
      kbIndexing(orm.em, client, { taskQueue }),
    ],
    log,
  );
  await dispatcher.start();
  return {
    worker,
    client,
    running,
    close: async () => {
      await dispatcher.stop();
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await clientConnection.close();
      await connection.close();
      await orm.close();
    },
  };
}
