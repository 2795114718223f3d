import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { SecretBox } from '../../lib/crypto/secret-box';
import { widgetUploadWorkflowId } from '../../workflows/widget-upload';
import { bearer, createKey, createWorkspace, MODELS_DIR, startTestApp, testBlobs, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { makeBigPdf } from '../../dev/fakes/documents';
import { multipart } from '../support/kb';
import { eventually, WorkerProcesses } from '../support/worker-process';

/**
 * The crash case of POST /upload is Temporal's, not a sweep's: a worker killed while it
 * extracts a visitor's upload is replaced, the next worker extracts again, and the
 * waiting request still answers 201 ready.
 */
const ORIGIN = 'https://shop.example';
const KEY = randomBytes(32).toString('hex');
let db: TestDatabase;
let workers: WorkerProcesses;
let connection: Connection;
let t: TestApp;

beforeAll(async () => {
  db = await createTestDatabase();
  workers = new WorkerProcesses(`uploadcrash-${randomBytes(4).toString('hex')}`, {
    DATABASE_URL: db.url,
    CONCIERGE_ENCRYPTION_KEY: KEY,
    // The worker reads the bytes the API stored.
    CONCIERGE_STORAGE_DIR: testBlobs.root,
    CONCIERGE_MODELS_DIR: MODELS_DIR,
  });
  await workers.registerNamespace();
  connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    temporal: { client: new Client({ connection, namespace: workers.namespace }), taskQueue: workers.namespace },
    serviceOptions: {
      box: SecretBox.fromString(KEY),
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
});

test('a worker killed mid-extraction: the next worker extracts again and POST /upload answers 201 ready', async () => {
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const agent = (
    await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { name: 'Shop', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [ORIGIN], file_upload: true } } } })
  ).json();
  await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.id}/publish`, headers: auth });
  const site = await t.services.sites.create(ws, agent.id, [ORIGIN]);
  const headers = { 'x-concierge-site': site.site_id, origin: ORIGIN };
  const conv = (await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers, payload: {} })).json().conversation_id;

  const first = await workers.start();
  const body = multipart([{ name: 'conversation_id', value: conv }, { name: 'file', value: await makeBigPdf(150), filename: 'manual.pdf' }]);
  const uploading = t.app.inject({ method: 'POST', url: '/api/public/widget/upload', headers: { ...headers, ...body.headers }, payload: body.payload });

  const client = t.composition.temporal!.client;
  const uploadId = await eventually(30_000, 'the upload to be stored', async () => {
    const [row] = await db.orm.em.fork().execute<{ id: string }[]>('select id from widget_uploads where conversation_id = ?', [conv]);
    return row?.id;
  });
  const handle = client.workflow.getHandle(widgetUploadWorkflowId(uploadId));
  await eventually(30_000, 'the worker to be extracting', async () => {
    const pending = (await handle.describe().catch(() => null))?.raw.pendingActivities ?? [];
    return pending.some((a) => a.activityType?.name === 'extractUpload' && a.state === temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED);
  });
  await workers.kill(first);
  expect((await db.orm.em.fork().execute('select status from widget_uploads where id = ?', [uploadId]))[0]).toEqual({ status: 'processing' });

  await workers.start();
  const res = await uploading;
  expect(res.statusCode).toBe(201);
  expect(res.json()).toMatchObject({ upload_id: uploadId, mime_type: 'application/pdf', status: 'ready' });
  const [row] = await db.orm.em.fork().execute<{ status: string; content: string }[]>('select status, content from widget_uploads where id = ?', [uploadId]);
  expect(row.status).toBe('ready');
  expect(row.content).toContain('Page 150.');
  // The extraction ran twice: the lost attempt and the one that finished.
  const history = await handle.fetchHistory();
  const attempts = (history.events ?? []).filter((e) => e.activityTaskStartedEventAttributes).map((e) => e.activityTaskStartedEventAttributes!.attempt);
  expect(attempts).toContain(2);
}, 180_000);
