import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { SecretBox } from '../../lib/crypto/secret-box';
import { CloudApiProvider, signHubPayload } from '../../providers/msgapp/cloud-api';
import { msgappInboundWorkflowId, type MsgappInboundResult } from '../../workflows/msgapp-inbound';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { workflowResult } from '../support/temporal';
import { eventually, WorkerProcesses } from '../support/worker-process';

/**
 * A worker lost while it downloads an inbound message's media: the provider (a fake Cloud
 * API on loopback) holds the first download until the worker is killed; a new worker
 * downloads again and finishes. One message, one stored blob, one media record, one
 * `message.inbound` — and a repeat of the provider's callback changes nothing.
 */
const KEY = randomBytes(32).toString('hex');
const APP_SECRET = 'crash-app-secret';
const PHONE_NUMBER_ID = '7707';
const MEDIA_ID = 'media-7707';
const BYTES = Buffer.from('%PDF-1.4 the signed lease, downloaded once');

let db: TestDatabase;
let workers: WorkerProcesses;
let connection: Connection;
let t: TestApp;
let provider: http.Server;
let providerUrl: string;
const storageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-inbound-crash-'));
/** Media byte requests the provider received; the first is held (never answered) until released. */
let byteRequests = 0;
let held: http.ServerResponse | null = null;

beforeAll(async () => {
  db = await createTestDatabase();
  provider = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const json = (body: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (url.pathname === `/${PHONE_NUMBER_ID}`) return json({ id: PHONE_NUMBER_ID, display_phone_number: '+15550007707', verified_name: 'Crash test' });
    if (url.pathname === `/${MEDIA_ID}`) return json({ messaging_product: 'whatsapp', url: `${providerUrl}/bytes/${MEDIA_ID}`, mime_type: 'application/pdf', file_size: BYTES.length, id: MEDIA_ID });
    if (url.pathname === `/bytes/${MEDIA_ID}`) {
      byteRequests++;
      if (byteRequests === 1) {
        // Headers sent, the body never: the worker is inside the download when it is killed.
        res.writeHead(200, { 'content-type': 'application/pdf', 'content-length': String(BYTES.length) });
        held = res;
        return;
      }
      return void res.writeHead(200, { 'content-type': 'application/pdf' }).end(BYTES);
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'unknown', code: 100 } }));
  });
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
  workers = new WorkerProcesses(`inboundcrash-${randomBytes(4).toString('hex')}`, {
    DATABASE_URL: db.url,
    CONCIERGE_ENCRYPTION_KEY: KEY,
    MSGAPP_API_BASE: providerUrl,
    CONCIERGE_STORAGE_DIR: storageDir,
  });
  await workers.registerNamespace();
  connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions: { box: SecretBox.fromString(KEY), msgapp: new CloudApiProvider({ baseUrl: providerUrl, timeoutMs: 5_000 }) },
    temporal: { client: new Client({ connection, namespace: workers.namespace }), taskQueue: workers.namespace },
    msgappWebhook: { appSecret: APP_SECRET, verifyToken: 'verify' },
  });
});
afterAll(async () => {
  await workers.stopAll();
  await t.close();
  await connection.close();
  held?.destroy();
  await new Promise((r) => provider.close(r));
  await db.drop();
  fs.rmSync(storageDir, { recursive: true, force: true });
});

/** Files under the worker's blob directory (content-addressed: one per distinct content). */
const blobFiles = (): string[] => {
  const root = path.join(storageDir, 'blobs');
  return fs.existsSync(root) ? (fs.readdirSync(root, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(root, f)).isFile()) : [];
};

test('a worker killed mid-download: the next worker finishes; the message, its media and message.inbound exist once', async () => {
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const cred = await t.services.credentials.create(ws, 'msgapp_access_token', 'n', 'token-7707');
  const agent = (
    await t.app.inject({
      method: 'POST',
      url: '/api/v1/agents',
      headers: auth,
      payload: { name: 'A', instructions: 'x', triggers: { msgapp: { number: '+15550007707', phone_number_id: PHONE_NUMBER_ID, credential_id: cred.id } }, actions: [{ type: 'sender' }] },
    })
  ).json();
  expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.id}/publish`, headers: auth })).json()).toMatchObject({ status: 'published', runnable: true });

  const wamid = `wamid.crash.${randomBytes(4).toString('hex')}`;
  const body = JSON.stringify({
    object: 'whatsapp_business_account',
    entry: [
      {
        id: 'waba',
        changes: [
          {
            field: 'messages',
            value: {
              messaging_product: 'whatsapp',
              metadata: { display_phone_number: '15550007707', phone_number_id: PHONE_NUMBER_ID },
              contacts: [{ wa_id: '15557770707', profile: { name: 'Dana' } }],
              messages: [{ from: '15557770707', id: wamid, timestamp: '1767225600', type: 'document', document: { id: MEDIA_ID, mime_type: 'application/pdf', filename: 'lease.pdf' } }],
            },
          },
        ],
      },
    ],
  });
  const notify = () => t.app.inject({ method: 'POST', url: '/webhooks/msgapp', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signHubPayload(body, APP_SECRET) }, payload: body });

  const first = await workers.start();
  // The webhook answers as soon as the message is stored: no worker step runs inside it.
  const accepted = await notify();
  expect(accepted.statusCode).toBe(200);
  await eventually(30_000, 'the worker to start downloading the media', async () => held !== null);
  await workers.kill(first);
  held!.destroy();
  expect(await db.orm.em.fork().execute('select 1 from messages where provider_message_id = ?', [wamid])).toEqual([]);

  await workers.start();
  const result = await workflowResult<MsgappInboundResult>(t.composition.temporal!.client, msgappInboundWorkflowId(wamid), 5_000);
  expect(result).toMatchObject({ status: 'recorded', messageId: expect.stringMatching(/^msg_/) });
  expect(byteRequests).toBe(2);

  // The provider delivers the callback again: stored once already, nothing more happens.
  expect((await notify()).statusCode).toBe(200);
  await new Promise((r) => setTimeout(r, 1_000));

  const em = db.orm.em.fork();
  const rows = await em.execute<{ id: string; content: { media?: Array<{ size: number; filename: string }>; media_error?: string } }[]>(
    'select id, content from messages where provider_message_id = ?',
    [wamid],
  );
  expect(rows).toHaveLength(1);
  expect(rows[0].id).toBe((result as { messageId: string }).messageId);
  expect(rows[0].content.media_error).toBeUndefined();
  expect(rows[0].content.media).toEqual([expect.objectContaining({ size: BYTES.length, filename: 'lease.pdf' })]);
  expect(blobFiles()).toHaveLength(1);
  const events = await em.execute<{ payload: string }[]>(`select payload from webhook_events where type = 'message.inbound' and workspace_id = ?`, [ws]);
  expect(events.map((e) => JSON.parse(e.payload).data.message_id)).toEqual([rows[0].id]);
  expect(await em.execute(`select count(*)::int as n from conversations where workspace_id = ? and channel = 'msgapp'`, [ws])).toEqual([{ n: 1 }]);
  expect(await em.execute(`select count(*)::int as n from customers where workspace_id = ?`, [ws])).toEqual([{ n: 1 }]);
}, 120_000);
