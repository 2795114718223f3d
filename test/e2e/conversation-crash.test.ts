import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { Client as PgClient } from 'pg';
import { SecretBox } from '../../lib/crypto/secret-box';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { eventually, WorkerProcesses } from '../support/worker-process';

const KEY = randomBytes(32).toString('hex');
const ORIGIN = 'https://shop.example';
let db: TestDatabase;
let llm: FakeLlm;
let workers: WorkerProcesses;
let connection: Connection;
let t: TestApp;
let site: { site_id: string };
/** Streams the model holds after their first delta, released by the test. */
const holds = new Map<number, () => void>();
let holdNext = false;

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({
    reply: () => ({ text: 'Your parcel left the warehouse this morning.' }),
    holdStream: (index) => {
      if (!holdNext) return undefined;
      holdNext = false;
      return new Promise<void>((resolve) => holds.set(index, resolve));
    },
  });
  workers = new WorkerProcesses(`convcrash-${randomBytes(4).toString('hex')}`, {
    DATABASE_URL: db.url,
    CONCIERGE_ENCRYPTION_KEY: KEY,
    LLM_BASE_URL: llm.url,
    LLM_MODEL: 'fake-model',
  });
  await workers.registerNamespace();
  connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions: { box: SecretBox.fromString(KEY) },
    temporal: { client: new Client({ connection, namespace: workers.namespace }), taskQueue: workers.namespace },
  });
  const ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const agent = (
    await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { name: 'A', instructions: 'x', triggers: { web_chat: { allowed_origins: [ORIGIN] } } } })
  ).json();
  await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.id}/publish`, headers: auth });
  site = await t.services.sites.create(ws, agent.id, [ORIGIN]);
});
afterAll(async () => {
  for (const release of holds.values()) release();
  await workers.stopAll();
  await t.close();
  await connection.close();
  await llm.close();
  await db.drop();
});

const headers = () => ({ 'x-concierge-site': site.site_id, origin: ORIGIN });
async function conversation(): Promise<string> {
  return (await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: headers(), payload: {} })).json().conversation_id;
}
async function counts(conversationId: string) {
  const rows = await db.orm.em
    .fork()
    .execute<{ role: string; n: number }[]>(`select role, count(*)::int as n from chat_messages where conversation_id = ? group by role order by role`, [conversationId]);
  return Object.fromEntries(rows.map((r) => [r.role, r.n]));
}

test('a worker lost mid-stream: the turn runs again elsewhere; one visitor message, one reply', async () => {
  const conv = await conversation();
  const first = await workers.start();
  holdNext = true;
  const before = llm.requests.length;
  const sending = t.app.inject({ method: 'POST', url: '/api/public/widget/send', headers: headers(), payload: { conversation_id: conv, text: 'where is my parcel?' } });
  await eventually(30_000, 'the model to start streaming', async () => holds.size === 1);
  await workers.kill(first);
  await workers.start();
  const res = await sending;
  expect(res.statusCode).toBe(200);
  expect(res.json().text).toBe('Your parcel left the warehouse this morning.');
  // The lost stream was asked again (heartbeat timeout), and only one answer was kept.
  expect(llm.requests.length - before).toBe(2);
  expect(await counts(conv)).toEqual({ assistant: 1, user: 1 });
  await workers.stopAll();
}, 120_000);

test('a worker lost after the reply was stored: the retry re-announces it and never asks the model again', async () => {
  const conv = await conversation();
  const first = await workers.start();
  holdNext = true;
  const before = llm.requests.length;
  const sending = t.app.inject({ method: 'POST', url: '/api/public/widget/send', headers: headers(), payload: { conversation_id: conv, text: 'and my refund?' } });
  await eventually(30_000, 'the model to start streaming', async () => holds.size === 2);
  // Hold the conversation row against updates (not against the reply's foreign-key check):
  // the reply row commits, the step after it blocks.
  const blocker = new PgClient({ connectionString: db.url });
  await blocker.connect();
  await blocker.query('begin');
  await blocker.query('select 1 from conversations where id = $1 for no key update', [conv]);
  [...holds.values()][1]();
  await eventually(30_000, 'the reply to be stored', async () => (await counts(conv)).assistant === 1);
  await new Promise((r) => setTimeout(r, 300));
  await workers.kill(first);
  await blocker.query('rollback');
  await blocker.end();
  await workers.start();
  const res = await sending;
  expect(res.statusCode).toBe(200);
  expect(res.json().text).toBe('Your parcel left the warehouse this morning.');
  expect(llm.requests.length - before).toBe(1);
  expect(await counts(conv)).toEqual({ assistant: 1, user: 1 });
}, 120_000);
