import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { SecretBox } from '../../core/crypto/secret-box';
import { createServices } from '../../core/services';
import { emitEvent } from '../../core/webhooks/emitter';
import { createWorkspace, testServiceOptions } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { createTestPki, startHttpsReceiver, type HttpsReceiver } from '../support/tls';

/**
 * The production worker entry (worker/main.ts) as a real child process, killed with
 * SIGKILL in the middle of a delivery and started again.
 */
const ROOT = path.resolve(__dirname, '../..');
const KEY = randomBytes(32).toString('hex');

let db: TestDatabase;
let receiver: HttpsReceiver;
let caFile: string;
let ws: string;
const children: ChildProcess[] = [];
const answered2xx: string[] = [];
let holdFirst = true;
let firstHit: () => void;
const firstHitSeen = new Promise<void>((resolve) => (firstHit = resolve));

beforeAll(async () => {
  db = await createTestDatabase();
  ws = await createWorkspace(db.orm);
  await registerNamespace();
  caFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-ca-')), 'ca.pem');
  fs.writeFileSync(caFile, createTestPki().ca);
  receiver = await startHttpsReceiver({
    handler: (req, res) => {
      if (holdFirst) {
        // Never answered: the worker dies while waiting for this response.
        holdFirst = false;
        firstHit();
        return;
      }
      answered2xx.push(String(req.headers['x-concierge-delivery']));
      res.writeHead(200).end('ok');
    },
  });
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await receiver.close();
  await db.drop();
});

const taskQueue = `crash-${randomBytes(4).toString('hex')}`;
// A namespace of its own: the worker it spawns creates the service's schedules at boot,
// which must not collide with other test files on the shared dev server.
const namespace = taskQueue;

async function registerNamespace(): Promise<void> {
  const connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS });
  try {
    await connection.workflowService.registerNamespace({
      namespace,
      // protobufjs accepts a plain number where the type says Long.
      workflowExecutionRetentionPeriod: { seconds: 86_400 as never },
    });
  } finally {
    await connection.close();
  }
}

function startWorker(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS,
      TEMPORAL_TASK_QUEUE: taskQueue,
      TEMPORAL_NAMESPACE: namespace,
      CONCIERGE_ENCRYPTION_KEY: KEY,
      CONCIERGE_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
      CONCIERGE_WEBHOOK_BACKOFF_MS: '200,200,200,200,200',
      CONCIERGE_WEBHOOK_TIMEOUT_MS: '2000',
      // The standard way to trust a private CA: read by Node at process start.
      NODE_EXTRA_CA_CERTS: caFile,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      output += d.toString();
      if (output.includes('worker polling')) resolve(child);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`worker exited (${code}) before it was ready:\n${output}`)));
  });
}

async function deliveryStatus(id: string): Promise<string> {
  const [row] = await db.orm.em.fork().execute<{ status: string }[]>('select status from webhook_deliveries where id = ?', [id]);
  return row.status;
}

test('a worker killed mid-delivery: the delivery completes after a restart, with exactly one 2xx per delivery id', async () => {
  const services = createServices(db.orm.em, testServiceOptions({ box: SecretBox.fromString(KEY) }));
  await services.subscriptions.create(ws, `${receiver.url}/hook`, ['message.inbound']);

  // The event is committed while no worker (and so no dispatcher) runs at all:
  // a crash right after the business write must lose nothing.
  const { deliveryIds } = await db.orm.em.fork().transactional((tx) => emitEvent(tx, ws, 'message.inbound', { message_id: 'msg_crash' }));
  expect(deliveryIds).toHaveLength(1);
  const [deliveryId] = deliveryIds;

  const first = await startWorker();
  await firstHitSeen;
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));
  expect(await deliveryStatus(deliveryId)).toBe('pending');

  await startWorker();
  const deadline = Date.now() + 60_000;
  while ((await deliveryStatus(deliveryId)) !== 'delivered') {
    if (Date.now() > deadline) throw new Error('delivery did not complete after the restart');
    await new Promise((r) => setTimeout(r, 200));
  }
  expect(answered2xx).toEqual([deliveryId]);
  expect(receiver.hits.length).toBeGreaterThanOrEqual(2);
  expect(new Set(receiver.hits.map((h) => h.headers['x-concierge-delivery']))).toEqual(new Set([deliveryId]));
  // Give a duplicate a moment to show up, if the design allowed one.
  await new Promise((r) => setTimeout(r, 1_000));
  expect(answered2xx).toEqual([deliveryId]);
}, 90_000);
