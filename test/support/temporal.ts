import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, makeTelemetryFilterString, NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import type { ActivityDeps } from '../../activities';
import { createExtractor } from '../../core/kb/extractor';
import { IndexingService } from '../../core/kb/indexing';
import { testEmbedder } from './app';
import { writeTestLog } from './secret-log';
import { createWorker } from '../../worker/worker';
import { ensureSearchAttributes } from '../../worker/search-attributes';

export const HISTORIES_DIR = path.resolve(__dirname, '../replay/histories');

let runtimeInstalled = false;
/**
 * Worker logs: INFO and above into the run's log files (scanned for secrets, see
 * secret-log.ts), only errors on the console, so test output shows what matters.
 */
export function installQuietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const console = new DefaultLogger('ERROR');
  const logger = new DefaultLogger('INFO', (entry) => {
    writeTestLog(JSON.stringify({ level: entry.level, msg: entry.message, meta: entry.meta }, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)));
    if (entry.level === 'ERROR') console.error(entry.message, entry.meta);
  });
  Runtime.install({ logger, telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } } });
}

/** The run's shared dev server (see global-setup.ts), a client, and a worker on a task queue of this file's own. */
export async function startTestWorker(partial: Omit<ActivityDeps, 'indexing'> & { indexing?: ActivityDeps['indexing'] }): Promise<{ client: Client; worker: Worker; taskQueue: string; close(): Promise<void> }> {
  const address = process.env.TEST_TEMPORAL_ADDRESS;
  const bundle = process.env.TEST_WORKFLOW_BUNDLE;
  if (!address || !bundle) throw new Error('Temporal test server not started: run the tests through jest (global-setup.ts)');
  installQuietRuntime();
  const deps: ActivityDeps = {
    ...partial,
    indexing:
      partial.indexing ??
      new IndexingService({ em: partial.em, blobs: partial.services.blobs, extract: createExtractor({ timeoutMs: 60_000, maxMemoryMb: 512, transcriber: null }), embedder: testEmbedder }),
  };
  const taskQueue = `test-${randomBytes(6).toString('hex')}`;
  const nativeConnection = await NativeConnection.connect({ address });
  const connection = await Connection.connect({ address });
  const client = new Client({ connection });
  await ensureSearchAttributes(connection, 'default');
  const worker = await createWorker({ connection: nativeConnection, namespace: 'default', taskQueue, deps, workflowBundle: { codePath: bundle } });
  const running = worker.run();
  return {
    client,
    worker,
    taskQueue,
    close: async () => {
      worker.shutdown();
      await running;
      await connection.close();
      await nativeConnection.close();
    },
  };
}

/**
 * With RECORD_HISTORIES=1, stores a finished workflow's history as a replay fixture
 * (test/replay/histories/NAME.json). Run when a workflow changes on purpose.
 */
export async function maybeRecordHistory(client: Client, workflowId: string, name: string): Promise<void> {
  if (!process.env.RECORD_HISTORIES) return;
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  fs.mkdirSync(HISTORIES_DIR, { recursive: true });
  fs.writeFileSync(path.join(HISTORIES_DIR, `${name}.json`), `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 2)}\n`);
}

/** The result of a workflow that another component starts (a dispatcher): waits for it to exist, then to finish. */
export async function workflowResult<T = unknown>(client: Client, workflowId: string, waitToStartMs = 10_000): Promise<T> {
  const handle = client.workflow.getHandle(workflowId);
  const deadline = Date.now() + waitToStartMs;
  for (;;) {
    try {
      return (await handle.result()) as T;
    } catch (err) {
      if (!/not found/i.test((err as Error).message) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
