import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { SecretBox } from '../../lib/crypto/secret-box';
import { StructuredExtraction } from '../../db/entities';
import { structuredExtractionWorkflowId } from '../../workflows/structured-extraction';
import { bearer, createKey, createWorkspace, MODELS_DIR, startTestApp, testBlobs, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { multipart } from '../support/kb';
import { eventually, WorkerProcesses } from '../support/worker-process';

/**
 * A worker killed while it waits for the model's answer to a structured extraction: the
 * next worker asks again (Temporal notices the missing heartbeat), the waiting request
 * still answers 200, and the result is stored once.
 */
const KEY = randomBytes(32).toString('hex');
const MODEL = 'fake-extractor';
let db: TestDatabase;
let llm: FakeLlm;
let workers: WorkerProcesses;
let connection: Connection;
let t: TestApp;
/** Resolves when the model has received its first request (the worker to kill is then mid-call). */
let firstCall!: () => void;
const firstCallSeen = new Promise<void>((r) => {
  firstCall = r;
});

beforeAll(async () => {
  llm = await startFakeLlm({
    reply: async (_body, index) => {
      if (index === 0) {
        firstCall();
        // Never answered: the worker asking is killed.
        await new Promise(() => undefined);
      }
      return { text: JSON.stringify({ order_number: 'A-1001', total: 12.5 }) };
    },
  });
  db = await createTestDatabase();
  workers = new WorkerProcesses(`extractcrash-${randomBytes(4).toString('hex')}`, {
    DATABASE_URL: db.url,
    CONCIERGE_ENCRYPTION_KEY: KEY,
    // The worker reads the bytes the API stored.
    CONCIERGE_STORAGE_DIR: testBlobs.root,
    CONCIERGE_MODELS_DIR: MODELS_DIR,
    STRUCTURED_BASE_URL: llm.url,
    STRUCTURED_MODEL: MODEL,
  });
  await workers.registerNamespace();
  connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    temporal: { client: new Client({ connection, namespace: workers.namespace }), taskQueue: workers.namespace },
    serviceOptions: {
      box: SecretBox.fromString(KEY),
      structured: { llm: { baseUrl: llm.url, model: MODEL }, chunkChars: 12_000, maxChunks: 20 },
      extract: async () => {
        throw new Error('extraction ran in the API process');
      },
    },
  });
});
afterAll(async () => {
  await workers.stopAll();
  await t.close();
  await connection.close();
  await db.drop();
  await llm.close();
});

test('a worker killed mid model call: the next worker asks again, the request answers 200, the result is stored once', async () => {
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['documents:extract'])).key);
  const schema = {
    type: 'object',
    properties: { order_number: { type: 'string' }, total: { type: 'number' } },
    required: ['order_number', 'total'],
    additionalProperties: false,
  };
  const first = await workers.start();
  const body = multipart([
    { name: 'schema', value: JSON.stringify(schema) },
    { name: 'file', value: 'Order A-1001. Total: 12.50 EUR.\n', filename: 'order.txt' },
  ]);
  const extracting = t.app.inject({ method: 'POST', url: '/api/v1/documents/extract_structured', headers: { ...auth, ...body.headers }, payload: body.payload });

  await firstCallSeen;
  const [row] = await db.orm.em.fork().find(StructuredExtraction, { workspaceId: ws });
  const handle = t.composition.temporal!.client.workflow.getHandle(structuredExtractionWorkflowId(row.id));
  await eventually(30_000, 'the model call to be running', async () => {
    const pending = (await handle.describe().catch(() => null))?.raw.pendingActivities ?? [];
    return pending.some((a) => a.activityType?.name === 'answerExtractionChunk' && a.state === temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED);
  });
  await workers.kill(first);
  expect((await db.orm.em.fork().findOneOrFail(StructuredExtraction, { id: row.id })).status).toBe('running');

  await workers.start();
  const res = await extracting;
  expect(res.statusCode).toBe(200);
  expect(res.json()).toEqual({ data: { order_number: 'A-1001', total: 12.5 }, model: MODEL });
  // Asked twice (the lost call and the one that finished), stored once with the usage of the call that counted.
  expect(llm.requests).toHaveLength(2);
  const done = await db.orm.em.fork().find(StructuredExtraction, { workspaceId: ws });
  expect(done).toHaveLength(1);
  expect(done[0]).toMatchObject({ status: 'succeeded', modelCalls: 1 });
  expect(await db.orm.em.fork().execute('select count(*)::int as n from usage_records where extraction_id = ?', [row.id])).toEqual([{ n: 1 }]);
  const history = await handle.fetchHistory();
  const attempts = (history.events ?? []).filter((e) => e.activityTaskStartedEventAttributes).map((e) => e.activityTaskStartedEventAttributes!.attempt);
  expect(attempts).toContain(2);
  expect((history.events ?? []).filter((e) => e.workflowExecutionCompletedEventAttributes)).toHaveLength(1);
}, 180_000);
