import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { serviceCodec, temporalDataConverter } from '../../lib/crypto/payload-codec';
import { SecretBox } from '../../lib/crypto/secret-box';
import { pickPort } from '../../dev/embedded/ports';
import { purgeExpiredWorkflow } from '../../workflows';
import { buildOnce } from '../support/build';
import { createTestDatabase, createWorkspace, type TestDatabase } from '../support/db';
import { eventually, WorkerProcesses } from '../support/worker-process';

/**
 * The production build: `npm run build` compiles to dist/ and prebuilds the workflow
 * bundle; the compiled API and worker entries then run under plain Node (no tsx loader:
 * Node 20 cannot load a .ts file without one), and the worker loads the prebuilt bundle.
 */
const ROOT = path.resolve(__dirname, '../..');

let db: TestDatabase;
let workers: WorkerProcesses;
const namespace = `build-${randomBytes(4).toString('hex')}`;
const key = randomBytes(32).toString('base64');
let api: ChildProcess | null = null;

beforeAll(async () => {
  // Once per run, shared with the other suites that run dist/ (cluster.test.ts).
  await buildOnce();
  db = await createTestDatabase();
  workers = new WorkerProcesses(namespace, { DATABASE_URL: db.url, CONCIERGE_ENCRYPTION_KEY: key, NODE_ENV: 'production' });
  await workers.registerNamespace();
}, 360_000);

afterAll(async () => {
  api?.kill('SIGKILL');
  await workers?.stopAll();
  await db?.drop();
});

test('npm run build writes the compiled entries and the workflow bundle, and no test, bench or sandbox code', () => {
  for (const f of ['api/main.js', 'worker/main.js', 'bin/admin.js', 'lib/extract/child.js', 'domain/extraction/validate-worker.js', 'workflow-bundle.js']) {
    expect(fs.existsSync(path.join(ROOT, 'dist', f))).toBe(true);
  }
  for (const d of ['test', 'bench', 'dev/fake-msgapp']) expect(fs.existsSync(path.join(ROOT, 'dist', d))).toBe(false);
});

test('the compiled worker runs under plain Node, loads the prebuilt bundle and executes workflows from it', async () => {
  const child = await workers.start('compiled');
  expect(workers.output(child)).toContain(`workflows: prebuilt bundle ${path.join(ROOT, 'dist', 'workflow-bundle.js')}`);

  // An expired Idempotency-Key row: the maintenance workflow (run by this worker) purges it.
  const ws = await createWorkspace(db.orm);
  await db.orm.em
    .fork()
    .execute(`insert into idempotency_keys (workspace_id, key, request_hash, state, expires_at) values (?, 'old', 'h', 'completed', now() - interval '1 hour')`, [ws]);
  const connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
  try {
    // The worker encrypts what it writes (lib/crypto/payload-codec.ts): the client needs the same key to read the result.
    const client = new Client({ connection, namespace, dataConverter: temporalDataConverter(serviceCodec(SecretBox.fromString(key), 1)) });
    const result = await client.workflow.execute(purgeExpiredWorkflow, { taskQueue: namespace, workflowId: `purge-${randomBytes(4).toString('hex')}` });
    expect(result.idempotencyKeys).toBe(1);
  } finally {
    await connection.close();
  }
}, 120_000);

test('the compiled API runs under plain Node and serves the API, its OpenAPI document and the widget', async () => {
  const port = await pickPort('127.0.0.1', 0);
  let output = '';
  api = spawn(process.execPath, ['dist/api/main.js'], {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS,
      TEMPORAL_NAMESPACE: namespace,
      CONCIERGE_ENCRYPTION_KEY: key,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  api.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  api.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  await eventually(30_000, `the compiled API to listen (output so far: ${output})`, async () => output.includes('API on'));
  const base = `http://127.0.0.1:${port}`;
  expect((await fetch(`${base}/healthz`)).status).toBe(200);
  const doc = (await (await fetch(`${base}/api/v1/openapi.json`)).json()) as { openapi: string };
  expect(doc.openapi).toMatch(/^3\.1/);
  const widget = await fetch(`${base}/widget.js`);
  expect(widget.status).toBe(200);
  // Deny by default holds in the compiled build too.
  expect((await fetch(`${base}/api/v1/kb/folders`)).status).toBe(401);
}, 60_000);
