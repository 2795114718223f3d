import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { Client as PgClient } from 'pg';
import { SecretBox } from '../../lib/crypto/secret-box';
import { CloudApiProvider } from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { eventually, WorkerProcesses } from '../support/worker-process';

const KEY = randomBytes(32).toString('hex');
let db: TestDatabase;
let sandbox: MsgappSandbox;
let workers: WorkerProcesses;
let connection: Connection;
let t: TestApp;

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startMsgappSandbox({ appSecret: 'secret' });
  workers = new WorkerProcesses(`sendcrash-${randomBytes(4).toString('hex')}`, {
    DATABASE_URL: db.url,
    CONCIERGE_ENCRYPTION_KEY: KEY,
    MSGAPP_API_BASE: sandbox.url,
  });
  await workers.registerNamespace();
  connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions: { box: SecretBox.fromString(KEY), msgapp: new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 }) },
    temporal: { client: new Client({ connection, namespace: workers.namespace }), taskQueue: workers.namespace },
  });
});
afterAll(async () => {
  await workers.stopAll();
  await t.close();
  await connection.close();
  await sandbox.close();
  await db.drop();
});

test('a worker lost between the provider’s acceptance and the database write: one message at the provider, recorded once', async () => {
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['conversations:write', 'workflows:write', 'workflows:publish'])).key);
  const cred = await t.services.credentials.create(ws, 'msgapp_access_token', 'n', 'token');
  const agent = (
    await t.app.inject({
      method: 'POST',
      url: '/api/v1/agents',
      headers: auth,
      payload: {
        name: 'A',
        instructions: 'x',
        triggers: { msgapp: { number: '+15550006666', phone_number_id: '66', credential_id: cred.id } },
        actions: [{ type: 'sender' }],
        templates: [{ name: 'hello', body: 'Hello', status: 'approved' }],
      },
    })
  ).json();
  await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.id}/publish`, headers: auth });

  // Hold the usage table so the "mark sent" step blocks after the provider accepted.
  const blocker = new PgClient({ connectionString: db.url });
  await blocker.connect();
  await blocker.query('begin');
  await blocker.query('lock table usage_records in access exclusive mode');

  const first = await workers.start();
  const sending = t.app.inject({ method: 'POST', url: '/api/v1/messages', headers: auth, payload: { agent_id: agent.id, to: '+15557776666', template: { name: 'hello' } } });
  await eventually(30_000, 'the provider to accept the message', async () => sandbox.sent.length === 1);
  await new Promise((r) => setTimeout(r, 500));
  await workers.kill(first);
  await blocker.query('rollback');
  await blocker.end();

  await workers.start();
  const res = await sending;
  expect(res.statusCode).toBe(201);
  expect(sandbox.sent).toHaveLength(1);
  expect(res.json().provider_message_id).toBe(sandbox.sent[0].providerMessageId);
  const em = db.orm.em.fork();
  expect(await em.execute('select status from messages where id = ?', [res.json().id])).toEqual([{ status: 'sent' }]);
  expect(await em.execute('select count(*)::int as n from usage_records where message_id = ?', [res.json().id])).toEqual([{ n: 1 }]);
}, 120_000);
