// `npm start`'s main process (bin/start.ts startAll, in this process) builds one service graph:
// one ORM, one LISTEN connection, one embedder, one extraction pool whose cap holds across
// the API and the worker; the outbox relay runs in a second process, started again when it dies.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MikroORM } from '@mikro-orm/postgresql';
import { startAll, type Started } from '../../bin/start';
import { loadConfig } from '../../app/config';
import { LocalEmbedder } from '../../providers/embeddings/embedder';
import { createTestDatabase, createWorkspace, type TestDatabase } from '../support/db';
import { MODELS_DIR } from '../support/app';
import { multipart } from '../support/kb';
import { recordSecret } from '../support/secret-log';
import { WorkerProcesses } from '../support/worker-process';
import { registry, renderMetrics } from '../../app/metrics';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** This process's extraction children (lib/extract forks its child script), read from /proc. */
function extractionChildren(): number {
  let n = 0;
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
      if (Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]) !== process.pid) continue;
      if (/extract[/\\]child/.test(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8'))) n++;
    } catch {
      // exited meanwhile
    }
  }
  return n;
}

/** Errors the worker stopped with (npm start would exit): none expected. */
const workerStopped: unknown[] = [];
let db: TestDatabase;
let llm: FakeLlm;
let started: Started;
let dataDir: string;
let ormInits: jest.SpyInstance;
let modelLoads: jest.SpyInstance;
const namespace = `one-process-${Date.now().toString(36)}`;

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply: () => ({ text: 'We open at nine, Monday to Saturday.' }) });
  // Its own namespace: the worker creates the service's schedules at start.
  await new WorkerProcesses(namespace, {}).registerNamespace();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-one-process-'));
  ormInits = jest.spyOn(MikroORM, 'init');
  modelLoads = jest.spyOn(LocalEmbedder.prototype as unknown as { doLoad(): Promise<unknown> }, 'doLoad');
  jest.spyOn(console, 'log').mockImplementation(() => undefined);
  const config = loadConfig({
    HOST: '127.0.0.1',
    DATABASE_URL: db.url,
    TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS,
    TEMPORAL_NAMESPACE: namespace,
    TEMPORAL_TASK_QUEUE: namespace,
    CONCIERGE_DATA_DIR: dataDir,
    CONCIERGE_MODELS_DIR: MODELS_DIR,
    EXTRACT_CONCURRENCY: '1',
    LOG_LEVEL: 'warn',
    LLM_BASE_URL: llm.url,
    LLM_MODEL: 'fake-model',
    // A webhook to a closed loopback port fails its first attempt (the relay's), and its retry waits a minute.
    CONCIERGE_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    CONCIERGE_WEBHOOK_BACKOFF_MS: '60000,60000,60000,60000,60000',
  });
  started = await startAll(config, (err) => workerStopped.push(err));
}, 120_000);

afterAll(async () => {
  await started?.stop();
  await llm?.close();
  jest.restoreAllMocks();
  await db.drop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

test("npm start's main process holds one ORM, one LISTEN connection, one embedder and one extraction pool, whose cap holds", async () => {
  const c = started.composition;
  const ws = await createWorkspace(db.orm);
  const { key } = await c.services.apiKeys.create(ws, 'one process', ['kb:read', 'kb:write']);
  recordSecret('api key', key);
  const auth = { authorization: `Bearer ${key}` };

  // Count extraction processes while four uploads are indexed at once.
  let peak = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, extractionChildren());
      await sleep(5);
    }
  })();
  const ids = await Promise.all(
    [1, 2, 3, 4].map(async (i) => {
      const body = multipart([{ name: 'file', value: `# Policy ${i}\n\nReturns are accepted within ${i * 10} days of delivery.`, filename: `policy-${i}.md`, type: 'text/markdown' }]);
      const res = await fetch(`${started.base}/api/v1/kb/files`, { method: 'POST', headers: { ...auth, ...body.headers }, body: body.payload });
      expect(res.status).toBe(201);
      return ((await res.json()) as { id: string }).id;
    }),
  );
  const deadline = Date.now() + 90_000;
  for (;;) {
    const statuses = await Promise.all(
      ids.map(async (id) => ((await (await fetch(`${started.base}/api/v1/kb/files/${id}`, { headers: auth })).json()) as { status: string }).status),
    );
    if (statuses.every((s) => s === 'active')) break;
    if (Date.now() > deadline) throw new Error(`files not indexed: ${statuses.join(', ')}`);
    await sleep(100);
  }
  sampling = false;
  await sampler;
  // The worker embedded the passages; the API embeds the query: the same embedder.
  const search = await fetch(`${started.base}/api/v1/kb/search`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ query: 'how long do I have to return an item' }) });
  expect(search.status).toBe(200);
  expect(((await search.json()) as { matches: unknown[] }).matches.length).toBeGreaterThan(0);

  expect(workerStopped).toEqual([]);
  expect(peak).toBe(1);
  expect(ormInits).toHaveBeenCalledTimes(1);
  expect(modelLoads).toHaveBeenCalledTimes(1);
  const listening = await db.orm.em
    .fork()
    .execute<{ n: string }[]>(`select count(*) as n from pg_stat_activity where datname = current_database() and application_name = 'concierge notifications'`);
  // This process's, and the relay process's.
  expect(Number(listening[0].n)).toBe(2);
  // The API's widget uploads and the worker's indexing draw on that one pool.
  expect(c.indexing).toBeDefined();
  expect((c.services.uploads as unknown as { deps: { extract: unknown } }).deps.extract).toBe(c.extract);
  expect((c.indexing as unknown as { deps: { extract: unknown; embedder: unknown } }).deps).toMatchObject({ extract: c.extract, embedder: c.embedder });
}, 150_000);

test("npm start's msgapp sandbox: a customer writes, the agent's reply reaches the sandbox once, its statuses come back", async () => {
  const c = started.composition;
  // No provider configured: npm start runs the sandbox and points MSGAPP_API_BASE at it.
  const sandbox = new URL(c.config.MSGAPP_API_BASE!).origin;
  const ws = await createWorkspace(db.orm);
  const { key } = await c.services.apiKeys.create(ws, 'msgapp', ['workflows:read', 'workflows:write', 'workflows:publish', 'conversations:read', 'conversations:write']);
  recordSecret('api key', key);
  const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const cred = await c.services.credentials.create(ws, 'msgapp_access_token', 'sandbox', 'sandbox-token');
  const created = await fetch(`${started.base}/api/v1/agents`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ name: 'Shop', instructions: 'Help.', triggers: { msgapp: { number: '+15550909090', phone_number_id: '909090', credential_id: cred.id } }, actions: [{ type: 'sender' }] }),
  });
  expect(created.status).toBe(201);
  const agentId = ((await created.json()) as { id: string }).id;
  expect((await fetch(`${started.base}/api/v1/agents/${agentId}/publish`, { method: 'POST', headers: { authorization: auth.authorization } })).status).toBe(200);

  const inbound = await fetch(`${sandbox}/_sandbox/inbound`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ from: '+15557090909', to: '909090', text: 'When do you open?' }) });
  expect(inbound.status).toBe(200);
  const sentTo = async () => ((await (await fetch(`${sandbox}/_sandbox/sent`)).json()) as { sent: Array<{ body: { to: string; text?: { body: string } } }> }).sent.filter((s) => s.body.to === '+15557090909');
  const deadline = Date.now() + 30_000;
  while ((await sentTo()).length === 0 && Date.now() < deadline) await sleep(100);
  await sleep(1_000);
  expect((await sentTo()).map((s) => s.body.text?.body)).toEqual(['We open at nine, Monday to Saturday.']);
  expect(llm.requests.at(-1)!.body.messages.at(-1)).toEqual({ role: 'user', content: 'When do you open?' });
  // The sandbox reports delivered and read: the reply's status follows (message.status events, as for any send).
  const statuses = async () =>
    (await db.orm.em.fork().execute<Array<{ status: string }>>(`select status from messages where workspace_id = ? and source = 'agent'`, [ws])).map((r) => r.status);
  while (!(await statuses()).includes('read') && Date.now() < deadline + 10_000) await sleep(100);
  expect(await statuses()).toEqual(['read']);

  // The business writes through the API (POST /api/v1/messages): its workflow starts eagerly on this process's worker.
  const human = await fetch(`${started.base}/api/v1/messages`, { method: 'POST', headers: auth, body: JSON.stringify({ agent_id: agentId, to: '+15557090909', text: 'Sam here: your order left today.' }) });
  expect({ status: human.status, body: human.status === 201 ? null : await human.text() }).toEqual({ status: 201, body: null });
  expect((await sentTo()).map((s) => s.body.text?.body)).toContain('Sam here: your order left today.');
  expect(workerStopped).toEqual([]);
}, 90_000);

test('the outbox relay runs in a process of its own; killed, it is started again and relays what waited', async () => {
  const c = started.composition;
  const first = started.relayPid();
  expect(first).toBeDefined();
  expect(first).not.toBe(process.pid);
  expect(fs.readFileSync(`/proc/${first}/cmdline`, 'utf8')).toMatch(/relay-main/);
  process.kill(first!, 'SIGKILL');
  // A file uploaded while no relay runs: its indexing start waits in the outbox for the next relay.
  const ws = await createWorkspace(db.orm);
  const { key } = await c.services.apiKeys.create(ws, 'relay', ['kb:read', 'kb:write']);
  recordSecret('api key', key);
  const auth = { authorization: `Bearer ${key}` };
  const body = multipart([{ name: 'file', value: '# Shipping\n\nOrders ship within two days.', filename: 'shipping.md', type: 'text/markdown' }]);
  const res = await fetch(`${started.base}/api/v1/kb/files`, { method: 'POST', headers: { ...auth, ...body.headers }, body: body.payload });
  expect(res.status).toBe(201);
  const id = ((await res.json()) as { id: string }).id;
  const deadline = Date.now() + 60_000;
  let status = '';
  while (Date.now() < deadline) {
    status = ((await (await fetch(`${started.base}/api/v1/kb/files/${id}`, { headers: auth })).json()) as { status: string }).status;
    if (status === 'active') break;
    await sleep(100);
  }
  expect(status).toBe('active');
  expect(started.relayPid()).not.toBe(first);
  expect(workerStopped).toEqual([]);
}, 90_000);

test("the relay process's counters are served with the main process's metrics", async () => {
  const c = started.composition;
  const ws = await createWorkspace(db.orm);
  // Nothing listens on port 1: the first attempt (the relay's, the main process has no relay) fails.
  await c.services.subscriptions.create(ws, 'https://127.0.0.1:1/hook', ['message.inbound']);
  const em = db.orm.em.fork();
  const attempts = async () => (await em.execute<{ n: string }[]>(`select coalesce(sum(attempt_count), 0) as n from webhook_deliveries where workspace_id = ?`, [ws]))[0].n;
  const failedAttempts = (text: string) => Number(/^concierge_webhook_attempts_total\{outcome="failed"\} (\d+)/m.exec(text)?.[1] ?? 0);
  const before = failedAttempts((await renderMetrics()).body);
  const own = failedAttempts(await registry.metrics());
  await c.em.fork().transactional((em) => c.services.repos.webhooks.emitEvent(em, ws, 'message.inbound', { message_id: 'msg_metrics', text: 'hi' }));
  const deadline = Date.now() + 30_000;
  while (Number(await attempts()) < 1 && Date.now() < deadline) await sleep(50);
  expect(Number(await attempts())).toBe(1);
  expect(failedAttempts((await renderMetrics()).body)).toBe(before + 1);
  // This process made no attempt: the one counted is the relay's.
  expect(failedAttempts(await registry.metrics())).toBe(own);
}, 60_000);
