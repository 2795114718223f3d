import { randomBytes } from 'node:crypto';
import { Client as PgClient } from 'pg';
import { SecretBox } from '../../lib/crypto/secret-box';
import { CloudApiProvider } from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { agentReplyId } from '../../app/temporal-clients/conversations';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { eventually, WorkerProcesses } from '../support/worker-process';

/**
 * The agent's msgapp reply survives a worker process killed between the model's answer
 * and the provider call: the new worker neither asks the model again nor sends twice.
 */
const KEY = randomBytes(32).toString('hex');
let db: TestDatabase;
let sandbox: MsgappSandbox;
let llm: FakeLlm;
let workers: WorkerProcesses;
let t: TestApp;
/** Released by the test once it holds the messages table: the model's answer waits for it. */
let release: () => void = () => undefined;
const locked = new Promise<void>((resolve) => (release = resolve));

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startMsgappSandbox({ appSecret: 'secret' });
  llm = await startFakeLlm({
    reply: async () => {
      await locked;
      return { text: 'Your parcel is on its way.' };
    },
  });
  workers = new WorkerProcesses(`agentcrash-${randomBytes(4).toString('hex')}`, {
    DATABASE_URL: db.url,
    CONCIERGE_ENCRYPTION_KEY: KEY,
    MSGAPP_API_BASE: sandbox.url,
    LLM_BASE_URL: llm.url,
    LLM_MODEL: 'fake-model',
  });
  await workers.registerNamespace();
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions: { box: SecretBox.fromString(KEY), msgapp: new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 }) },
    msgappWebhook: { appSecret: 'secret', verifyToken: 'v' },
  });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = t.app.server.address() as { port: number };
  sandbox.setWebhookUrl(`http://127.0.0.1:${port}/webhooks/msgapp`);
});
afterAll(async () => {
  release();
  await workers.stopAll();
  await t.close();
  await llm.close();
  await sandbox.close();
  await db.drop();
});

test('a worker killed after the model answered and before the provider call: one reply reaches the provider, the model was asked once', async () => {
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const cred = await t.services.credentials.create(ws, 'msgapp_access_token', 'n', 'token');
  const agent = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'A', instructions: 'x', triggers: { msgapp: { number: '+15550007777', phone_number_id: '77', credential_id: cred.id } }, actions: [{ type: 'sender' }] },
  });
  expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.json().id}/publish`, headers: auth })).statusCode).toBe(200);

  const first = await workers.start();
  const customer = '+15557007777';
  await sandbox.injectInbound({ from: customer, to: '77', text: 'Where is my parcel?' });
  await eventually(30_000, 'the model to be asked', async () => llm.requests.length === 1);
  // The message is recorded; hold the messages table, so the reply, once stored, cannot become a send.
  const blocker = new PgClient({ connectionString: db.url });
  await blocker.connect();
  await blocker.query('begin');
  await blocker.query('lock table messages in access exclusive mode');
  release();
  const em = db.orm.em.fork();
  const [inbound] = await em.execute<Array<{ id: string }>>(`select id from chat_messages where role = 'user' and text = 'Where is my parcel?'`);
  const replyId = agentReplyId(inbound.id);
  await eventually(30_000, 'the reply to be stored', async () => (await em.execute('select 1 from chat_messages where id = ?', [replyId])).length === 1);
  await new Promise((r) => setTimeout(r, 500));
  await workers.kill(first);
  expect(sandbox.sent).toHaveLength(0);
  await blocker.query('rollback');
  await blocker.end();

  await workers.start();
  await eventually(60_000, 'the reply to reach the provider', async () => sandbox.sent.length === 1);
  await new Promise((r) => setTimeout(r, 1_500));
  expect(sandbox.sent.map((s) => [s.body.to, (s.body.text as { body: string }).body])).toEqual([[customer, 'Your parcel is on its way.']]);
  expect(llm.requests).toHaveLength(1);
  expect(await em.execute('select source, status from messages where id = ?', [replyId])).toEqual([{ source: 'agent', status: expect.stringMatching(/^(sent|delivered|read)$/) }]);
}, 150_000);
