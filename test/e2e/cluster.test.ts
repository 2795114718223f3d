// The multi-machine shape (docker-compose.yml): two API processes and two workers, each the compiled entry of
// `npm run build` under plain Node, on one Temporal, one PostgreSQL database, one S3-compatible store (moto) and one
// Redis, configured by env as compose configures them. Nothing is shared in memory: what one process does, another
// sees through PostgreSQL (rows, NOTIFY), Temporal (task queues), the bucket or Redis. One cluster for every check:
// its start-up (four Node processes on two cores) is most of the suite's cost.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { pickPort } from '../../dev/embedded/ports';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { createTestPki, startHttpsReceiver, type HttpsReceiver } from '../../dev/fakes/tls';
import { WebhookRepository } from '../../domain/webhooks/emitter';
import { OUTBOX_CHANNEL } from '../../domain/webhooks/events';
import { SecretBox } from '../../lib/crypto/secret-box';
import { indexWorkflowId } from '../../worker/outbox-sources';
import type { Composition } from '../../app/compose';
import { bearer, createKey, createWorkspace, MODELS_DIR, testServices } from '../support/app';
import { buildOnce } from '../support/build';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { multipart } from '../support/kb';
import { startMoto, MOTO_CREDENTIALS, type MotoServer } from '../support/moto';
import { LOG_LEVEL, recordSecret, testLogFile } from '../support/secret-log';
import { frameCollector } from '../support/socket';
import { eventually, WorkerProcesses } from '../support/worker-process';

/** The webhook outbox, as the services write it (events are emitted in a transaction of the test's own). */
const webhooks = new WebhookRepository();

const ROOT = path.resolve(__dirname, '../..');
const KEY = randomBytes(32).toString('hex');
const BUCKET = 'concierge';
const ORIGIN = 'https://shop.example';
/** Requests a minute per API key (RATE_LIMIT_PER_KEY): small, so check c spends one key's budget in a few requests. */
const PER_KEY = 12;

let db: TestDatabase;
let moto: MotoServer;
let store: BlobProxy;
let llm: FakeLlm;
let receiver: HttpsReceiver;
let services: Composition;
let workers: WorkerProcesses;
let ws: string;
const apis: ApiProcess[] = [];
let workerChildren: ChildProcess[] = [];
let tmp: string;

/** The webhook receiver: how many requests each delivery id got, which it answered 2xx, and which it holds. */
const seen = new Map<string, number>();
const answered2xx: string[] = [];
let holdDeliveries = false;
let held: (id: string) => void = () => undefined;

interface ApiProcess {
  child: ChildProcess;
  base: string;
}

/**
 * The bucket as the four processes reach it: moto behind a pass-through proxy that can hold a GET of one object
 * (a worker reading the file it indexes) open until the worker dies: indexing held mid-flight for check e.
 */
interface BlobProxy {
  endpoint: string;
  hold(sha256: string | null): Promise<void>;
  close(): Promise<void>;
}

async function startBlobProxy(target: string): Promise<BlobProxy> {
  const upstream = new URL(target);
  let holding: { sha: string; onHeld: () => void } | null = null;
  const server = http.createServer((req, res) => {
    if (holding && req.method === 'GET' && req.url?.includes(holding.sha)) {
      // Never answered: the worker dies while reading the object.
      holding.onHeld();
      return;
    }
    const up = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (u) => {
      res.writeHead(u.statusCode ?? 502, u.headers);
      u.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    hold: (sha) =>
      new Promise<void>((resolve) => {
        holding = sha ? { sha, onHeld: resolve } : null;
        if (!sha) resolve();
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What docker-compose.yml's x-concierge-env gives both processes, with this machine's addresses. */
function sharedEnv(caFile: string): Record<string, string> {
  return {
    NODE_ENV: 'production',
    DATABASE_URL: db.url,
    CONCIERGE_ENCRYPTION_KEY: KEY,
    STORAGE_DRIVER: 's3',
    S3_BUCKET: BUCKET,
    S3_ENDPOINT: store.endpoint,
    S3_REGION: 'us-east-1',
    S3_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
    S3_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
    S3_FORCE_PATH_STYLE: 'true',
    CONCIERGE_MODELS_DIR: MODELS_DIR,
    // Staging and extraction temp files only (the bytes live in the bucket); the data dir holds nothing shared.
    CONCIERGE_DATA_DIR: tmp,
    CONCIERGE_STORAGE_DIR: path.join(tmp, 'staging'),
    LLM_BASE_URL: llm.url,
    LLM_MODEL: 'fake-model',
    // The test receiver is on loopback, with a certificate of the test CA (read by Node at process start).
    CONCIERGE_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    // (The attempt's time-out stays the default 10 s: on two busy cores a shorter one fails attempts the receiver
    // answered, and their retries are deliveries the receiver counts twice, as at-least-once allows.)
    NODE_EXTRA_CA_CERTS: caFile,
    // One extraction process per worker: two cores for four processes.
    EXTRACT_CONCURRENCY: '1',
  };
}

/** `node dist/api/main.js` as compose's `api` service runs it; resolves once it listens. */
async function startApi(env: Record<string, string>): Promise<ApiProcess> {
  const port = await pickPort('127.0.0.1', 0);
  const child = spawn(process.execPath, ['dist/api/main.js'], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...env,
      TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS,
      TEMPORAL_NAMESPACE: workers.namespace,
      TEMPORAL_TASK_QUEUE: workers.namespace,
      REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
      HOST: '127.0.0.1',
      PORT: String(port),
      RATE_LIMIT_PER_KEY: String(PER_KEY),
      LOG_LEVEL,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Into the run's log files, which are scanned for secrets (secret-log.ts).
  const logFile = testLogFile(`api-${child.pid}`);
  const log = logFile ? fs.createWriteStream(logFile, { flags: 'a' }) : null;
  child.once('close', () => log?.end());
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      log?.write(d);
      if (output.includes('API on')) return;
      output += d.toString();
      if (output.includes('API on')) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`API exited (${code}) before it listened:\n${output}`)));
  });
  expect(output).toContain('(rate limits: redis)');
  return { child, base: `http://127.0.0.1:${port}` };
}

const json = (auth: Record<string, string>) => ({ ...auth, 'content-type': 'application/json' });
async function call(api: ApiProcess, method: string, url: string, headers: Record<string, string>, body?: unknown) {
  const res = await fetch(`${api.base}${url}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

async function uploadTo(api: ApiProcess, auth: Record<string, string>, filename: string, content: string): Promise<string> {
  const form = multipart([{ name: 'file', value: content, filename, type: 'text/markdown' }]);
  const res = await fetch(`${api.base}/api/v1/kb/files`, { method: 'POST', headers: { ...auth, ...form.headers }, body: form.payload });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

const fileRow = async (id: string) =>
  (await db.orm.em.fork().execute<{ status: string; chunk_count: number; error_message: string | null }[]>('select status, chunk_count, error_message from kb_files where id = ?', [id]))[0];
const deliveryStatuses = async (ids: string[]) =>
  (await db.orm.em.fork().execute<{ status: string }[]>('select status from webhook_deliveries where id in (?)', [ids])).map((r) => r.status);
const emit = async (n: number, tag: string) =>
  (
    await Promise.all(
      Array.from({ length: n }, (_, i) => db.orm.em.fork().transactional((tx) => webhooks.emitEvent(tx, ws, 'message.inbound', { message_id: `msg_${tag}_${i}` }))),
    )
  ).flatMap((e) => e.deliveryIds);

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-cluster-'));
  const caFile = path.join(tmp, 'ca.pem');
  fs.writeFileSync(caFile, createTestPki().ca);
  const namespace = `cluster-${randomBytes(4).toString('hex')}`;
  // The build, the database, the store and the fakes at once; the processes need all of them.
  [db, moto, llm, receiver] = await Promise.all([
    buildOnce().then(createTestDatabase),
    startMoto(),
    startFakeLlm(),
    startHttpsReceiver({
      handler: (req, res) => {
        const id = String(req.headers['x-concierge-delivery']);
        seen.set(id, (seen.get(id) ?? 0) + 1);
        if (holdDeliveries) return held(id);
        answered2xx.push(id);
        res.writeHead(200).end('ok');
      },
    }),
    new WorkerProcesses(namespace, {}).registerNamespace(),
  ]);
  await moto.createBucket(BUCKET);
  store = await startBlobProxy(moto.endpoint);
  recordSecret('s3 secret access key', MOTO_CREDENTIALS.secretAccessKey);
  const env = sharedEnv(caFile);
  workers = new WorkerProcesses(namespace, env);
  // Both workers run every task queue's pollers and both outbox dispatchers (webhooks, indexing).
  const started = await Promise.all([workers.start('compiled'), workers.start('compiled'), startApi(env), startApi(env)]);
  workerChildren = started.slice(0, 2) as ChildProcess[];
  apis.push(...(started.slice(2) as ApiProcess[]));
  ws = await createWorkspace(db.orm);
  // Keys and the widget site, sealed with the cluster's key (no API route creates sites: the admin CLI does).
  services = await testServices(db, { box: SecretBox.fromString(KEY) });
}, 240_000);

afterAll(async () => {
  for (const api of apis) api.child.kill('SIGKILL');
  await workers?.stopAll();
  await services?.close();
  await Promise.all([store?.close(), moto?.stop(), llm?.close(), receiver?.close()]);
  await db?.drop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

describe('two APIs and two workers as separate processes', () => {
  test("a: a widget message sent through API A is answered on the visitor's socket held by API B", async () => {
    const [a, b] = apis;
    const auth = bearer((await createKey(services.services, ws, ['workflows:write', 'workflows:publish'])).key);
    const agent = await call(a, 'POST', '/api/v1/agents', json(auth), { name: 'Shop helper', instructions: 'Help shoppers.', triggers: { web_chat: { allowed_origins: [ORIGIN] } } });
    expect(agent.status).toBe(201);
    expect((await call(a, 'POST', `/api/v1/agents/${agent.body.id}/publish`, auth)).status).toBe(200);
    const site = await services.services.sites.create(ws, agent.body.id, [ORIGIN]);
    recordSecret('site secret', site.site_secret);
    const widget = { 'x-concierge-site': site.site_id, origin: ORIGIN, 'content-type': 'application/json' };

    const conv = await call(b, 'POST', '/api/public/widget/init', widget, {});
    expect(conv.status).toBe(200);
    const socket = await frameCollector(`${b.base.replace('http', 'ws')}/api/chat/connect?site_id=${site.site_id}&conversation_id=${conv.body.conversation_id}`, ORIGIN);
    try {
      const sent = await call(a, 'POST', '/api/public/widget/send', widget, { conversation_id: conv.body.conversation_id, text: 'where is my order?', delivery: 'async' });
      expect(sent.status).toBe(202);
      await socket.until((f) => f.some((x) => x.type === 'reply' && x.reply_id === sent.body.reply_id));
      expect(socket.frames.find((f) => f.type === 'reply')).toEqual({ type: 'reply', reply_id: sent.body.reply_id, text: 'You said: where is my order?' });
    } finally {
      socket.close();
    }
  });

  test('b: a file uploaded through A is found by meaning through B and A (each dense index follows NOTIFY)', async () => {
    const [a, b] = apis;
    const auth = bearer((await createKey(services.services, ws, ['kb:read', 'kb:write'])).key);
    // No word in common with the passage: only the dense side of the hybrid search can find it.
    const query = { query: 'refund period for shoes' };
    // Both processes hold the workspace's (empty) vectors before the upload.
    for (const api of [a, b]) expect((await call(api, 'POST', '/api/v1/kb/search', json(auth), query)).body).toEqual({ matches: [] });
    const id = await uploadTo(a, auth, 'returns.md', '# Returns policy\n\nUnworn boots can be sent back within 45 days of delivery.');
    await eventually(30_000, 'the file to be indexed', async () => (await fileRow(id)).status === 'active');
    for (const api of [b, a]) {
      const found = await eventually(5_000, 'the dense index to follow', async () => {
        const res = await call(api, 'POST', '/api/v1/kb/search', json(auth), query);
        return res.body.matches.length ? res.body.matches : undefined;
      });
      expect(found[0]).toMatchObject({ file_id: id, text: expect.stringContaining('Unworn boots') });
    }
  });

  test("c: rate limits are shared through Redis: a key's budget is spent across A and B together", async () => {
    const [a, b] = apis;
    // A workspace of its own: the workspace budget of the other checks is not touched.
    const { key } = await createKey(services.services, await createWorkspace(db.orm), ['kb:read']);
    const codes = await Promise.all(Array.from({ length: PER_KEY + 4 }, (_, i) => call(i % 2 ? b : a, 'GET', '/api/v1/kb/folders', bearer(key)).then((r) => r.status)));
    expect(codes.filter((c) => c === 200)).toHaveLength(PER_KEY);
    expect(codes.filter((c) => c === 429)).toHaveLength(4);
    for (const api of [a, b]) {
      const limited = await call(api, 'GET', '/api/v1/kb/folders', bearer(key));
      expect(limited.status).toBe(429);
      expect(limited.headers.get('x-ratelimit-limit')).toBe(String(PER_KEY));
    }
  });

  test('d: a burst of webhook events is delivered exactly once each by the two dispatchers', async () => {
    const auth = bearer((await createKey(services.services, ws, ['webhooks:read', 'webhooks:write'])).key);
    const sub = await call(apis[0], 'POST', '/api/v1/webhook-subscriptions', json(auth), { url: `${receiver.url}/hooks`, events: ['message.inbound'] });
    expect(sub.status).toBe(201);
    recordSecret('webhook secret', sub.body.secret);
    const ids = await emit(40, 'burst');
    expect(ids).toHaveLength(40);
    await eventually(30_000, 'every delivery to be delivered', async () => (await deliveryStatuses(ids)).every((s) => s === 'delivered'));
    // One request each at the receiver, one attempt each in the log.
    const log = await db.orm.em
      .fork()
      .execute<{ delivery_id: string; attempt: number; status_code: number | null; error: string | null }[]>(
        'select delivery_id, attempt, status_code, error from webhook_attempts where delivery_id in (?) order by attempt',
        [ids],
      );
    const report = ids.map((id) => ({ requests: seen.get(id), attempts: log.filter((a) => a.delivery_id === id).map((a) => `${a.attempt}: ${a.status_code ?? a.error}`) }));
    expect(report).toEqual(ids.map(() => ({ requests: 1, attempts: ['1: 200'] })));
  });

  test('e: a worker SIGKILLed while indexing and while delivering loses nothing: the other worker finishes both', async () => {
    const auth = bearer((await createKey(services.services, ws, ['kb:write'])).key);
    const content = '# Shipping\n\nBoots ship within three working days from Leeds.';
    const readHeld = store.hold(createHash('sha256').update(content).digest('hex'));
    const fileId = await uploadTo(apis[0], auth, 'shipping.md', content);
    await readHeld;
    // The worker whose activity reads the file (Temporal's default worker identity is pid@host).
    const indexer = await activityWorker(indexWorkflowId(fileId));
    const other = workerChildren.find((w) => w !== indexer)!;

    // The delivery goes to the same worker: the other is frozen while the indexer's dispatcher leases it.
    other.kill('SIGSTOP');
    let deliveryId: string;
    try {
      const holding = new Promise<string>((resolve) => (held = resolve));
      holdDeliveries = true;
      [deliveryId] = await emit(1, 'crash');
      expect(await holding).toBe(deliveryId);
    } finally {
      holdDeliveries = false;
      other.kill('SIGCONT');
    }
    await store.hold(null);
    expect((await fileRow(fileId)).status).toBe('processing');

    // kill() also times out the dead worker's started activity at once (see WorkerProcesses.kill). The delivery's
    // lease (the attempt's time-out + 10 s) is let run out the same way: expired, and the dispatchers woken.
    await workers.kill(indexer);
    await db.orm.em.fork().execute(`update webhook_deliveries set inline_lease_until = now() - interval '1 second' where id = ?`, [deliveryId]);
    await db.orm.em.fork().execute('select pg_notify(?, ?)', [OUTBOX_CHANNEL, ws]);

    const done = await eventually(30_000, 'the other worker to finish the indexing', async () => {
      const row = await fileRow(fileId);
      return row.status === 'active' || row.status === 'error' ? row : undefined;
    });
    expect(done).toMatchObject({ status: 'active', error_message: null });
    const [chunks] = await db.orm.em.fork().execute<{ n: string; ordinals: string; embedded: string }[]>(
      'select count(*) as n, count(distinct ordinal) as ordinals, count(embedding) as embedded from kb_chunks where file_id = ?',
      [fileId],
    );
    expect([Number(chunks.n), Number(chunks.ordinals), Number(chunks.embedded)]).toEqual([done.chunk_count, done.chunk_count, done.chunk_count]);

    await eventually(30_000, 'the other worker to make the delivery', async () => (await deliveryStatuses([deliveryId]))[0] === 'delivered');
    // The held request, then the one answered: one 2xx, logged as attempt 1 (the lost one never reached the log).
    expect(seen.get(deliveryId)).toBe(2);
    expect(answered2xx.filter((id) => id === deliveryId)).toHaveLength(1);
    const attempts = await db.orm.em.fork().execute<{ attempt: number; status_code: number }[]>('select attempt, status_code from webhook_attempts where delivery_id = ?', [deliveryId]);
    expect(attempts.map((a) => [a.attempt, a.status_code])).toEqual([[1, 200]]);
  });
});

/** The worker process running the started activity of a workflow, from the activity's last worker identity. */
async function activityWorker(workflowId: string): Promise<ChildProcess> {
  const connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
  try {
    const identity = await eventually(10_000, 'the activity to be started', async () => {
      const d = await connection.workflowService.describeWorkflowExecution({ namespace: workers.namespace, execution: { workflowId } });
      return d.pendingActivities?.find((a) => a.state === temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED)?.lastWorkerIdentity;
    });
    const pid = Number(identity!.split('@')[0]);
    const child = workerChildren.find((w) => w.pid === pid);
    if (!child) throw new Error(`no worker of this test has identity ${identity}`);
    return child;
  } finally {
    await connection.close();
  }
}
