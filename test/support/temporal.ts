import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, makeTelemetryFilterString, type Worker } from '@temporalio/worker';
import type { Composition } from '../../app/compose';
import { decryptPayloadsIn, EncryptionCodec } from '../../lib/crypto/payload-codec';
import type { Config } from '../../app/config';
import type { Orm } from '../../db/orm';
import { testCompose, type TestOverrides } from './app';
import { writeTestLog } from './secret-log';
import { connectWorker } from '../../worker/connection';
import { installRuntime, startWorker } from '../../worker/runtime';
import { ensureSearchAttributes } from '../../worker/namespace-attributes';

export const HISTORIES_DIR = path.resolve(__dirname, '../replay/histories');

/**
 * Worker logs: INFO and above into the run's log files (scanned for secrets, see
 * secret-log.ts), only errors on the console, so test output shows what matters.
 */
export function installQuietRuntime(): void {
  const console = new DefaultLogger('ERROR');
  const logger = new DefaultLogger('INFO', (entry) => {
    writeTestLog(JSON.stringify({ level: entry.level, msg: entry.message, meta: entry.meta }, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)));
    if (entry.level === 'ERROR') console.error(entry.message, entry.meta);
  });
  installRuntime({ logger, telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } } });
}

export interface TestWorker {
  client: Client;
  worker: Worker;
  taskQueue: string;
  /** The worker's service graph: its services, its LISTEN connection (for dispatchers the test starts). */
  composition: Composition;
  close(): Promise<void>;
}

/**
 * A worker as worker/main.ts runs one (compose + startWorker), on the run's shared dev
 * server (see global-setup.ts) and a task queue of this file's own, with the test's
 * overrides (fake model, provider URLs). No outbox relay: tests that need one start it
 * with a short sweep (see kb.ts); no schedules, which would pile up per task queue.
 */
/** `config`: further settings of the worker process (e.g. SIP_TRUNK_URI). */
export async function startTestWorker(db: { orm: Orm; url: string }, overrides: TestOverrides = {}, config: Partial<Config> = {}): Promise<TestWorker> {
  const address = process.env.TEST_TEMPORAL_ADDRESS;
  const bundle = process.env.TEST_WORKFLOW_BUNDLE;
  if (!address || !bundle) throw new Error('Temporal test server not started: run the tests through jest (global-setup.ts)');
  installQuietRuntime();
  const taskQueue = `test-${randomBytes(6).toString('hex')}`;
  // As worker/main.ts: the client and the worker share one native connection (so a test app given this client may start eagerly).
  const c = await testCompose('worker', { orm: db.orm, databaseUrl: db.url }, overrides, { config: { ...config, TEMPORAL_TASK_QUEUE: taskQueue }, temporalAddress: address, connectWorker });
  try {
    await ensureSearchAttributes(c.temporal!.client.connection as Connection, 'default');
    const { worker } = await startWorker(c, { workflowBundle: { codePath: bundle }, dispatcher: false, setUp: false });
    return { client: c.temporal!.client, worker, taskQueue, composition: c, close: () => c.close() };
  } catch (err) {
    await c.close();
    throw err;
  }
}

/**
 * With RECORD_HISTORIES=1, stores a finished workflow's history as a replay fixture
 * (test/replay/histories/NAME.json). Run when a workflow changes on purpose.
 */
export async function maybeRecordHistory(client: Client, workflowId: string, name: string): Promise<void> {
  if (!process.env.RECORD_HISTORIES) return;
  // Stored decrypted (the run's key is random): the fixtures replay with or without a key.
  const codec = client.options.loadedDataConverter.payloadCodecs.find((c): c is EncryptionCodec => c instanceof EncryptionCodec);
  const raw = await client.workflow.getHandle(workflowId).fetchHistory();
  const history = codec ? await decryptPayloadsIn(raw, codec) : raw;
  fs.mkdirSync(HISTORIES_DIR, { recursive: true });
  fs.writeFileSync(path.join(HISTORIES_DIR, `${name}.json`), `${JSON.stringify(JSON.parse(historyToJSON(history)), null, 2)}\n`);
}

/**
 * The summaries (user metadata) of a workflow's history events, decoded as the Temporal UI shows them through the
 * codec endpoint: they are payloads, encrypted like every other (lib/crypto/payload-codec.ts).
 */
export async function historySummaries(client: Client, workflowId: string): Promise<string[]> {
  const codec = client.options.loadedDataConverter.payloadCodecs.find((c): c is EncryptionCodec => c instanceof EncryptionCodec);
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const summaries = events.flatMap((e) => (e.userMetadata?.summary ? [e.userMetadata.summary] : []));
  const decoded = codec ? await decryptPayloadsIn(summaries, codec) : summaries;
  return decoded.map((p) => client.options.loadedDataConverter.payloadConverter.fromPayload<string>(p as never));
}

/** What a workflow's history shows of how it ran: started eagerly, its activities, its local activities, its patches. */
export interface HistorySteps {
  /** The first workflow task was handed to the starter's worker in the start call's answer. */
  eager: boolean;
  /** Activity types scheduled through the server (task queue), in order. */
  activities: string[];
  /** Activity types run as local activities (recorded as markers), in order. */
  localActivities: string[];
  patches: string[];
}

const decodePayload = (p: { data?: Uint8Array | null } | undefined): unknown => (p?.data ? JSON.parse(Buffer.from(p.data).toString('utf8')) : undefined);

export async function historySteps(client: Client, workflowId: string): Promise<HistorySteps> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const out: HistorySteps = { eager: false, activities: [], localActivities: [], patches: [] };
  for (const e of history.events ?? []) {
    if (e.workflowExecutionStartedEventAttributes) out.eager = Boolean(e.workflowExecutionStartedEventAttributes.eagerExecutionAccepted);
    const scheduled = e.activityTaskScheduledEventAttributes;
    if (scheduled) out.activities.push(scheduled.activityType?.name ?? '');
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName === 'core_local_activity') out.localActivities.push((decodePayload(marker.details?.data?.payloads?.[0]) as { activity_type?: string }).activity_type ?? '');
    if (marker?.markerName === 'core_patch') out.patches.push((decodePayload(marker.details?.['patch-data']?.payloads?.[0]) as { id?: string }).id ?? '');
  }
  return out;
}

/** The result of a workflow that another component starts (a dispatcher): waits for it to exist, then to finish. */
export async function workflowResult<T = unknown>(client: Client, workflowId: string, waitToStartMs = 10_000): Promise<T> {
  const handle = client.workflow.getHandle(workflowId);
  const deadline = Date.now() + waitToStartMs;
  for (;;) {
    try {
      return (await handle.result()) as T;
    } catch (err) {
      // Over a native connection (the worker's, shared with its client) the error has no message: its class says it.
      if (!(err instanceof WorkflowNotFoundError || /not found/i.test((err as Error).message)) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
