import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SecretBox } from '../../lib/crypto/secret-box';
import { WebhookRepository } from '../../domain/webhooks/emitter';
import { createWorkspace, testServices } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { createTestPki, startHttpsReceiver, type HttpsReceiver } from '../../dev/fakes/tls';
import { eventually, WorkerProcesses } from '../support/worker-process';

/** The webhook outbox, as the services write it (events are emitted in a transaction of the test's own). */
const webhooks = new WebhookRepository();

const KEY = randomBytes(32).toString('hex');

let db: TestDatabase;
let receiver: HttpsReceiver;
let workers: WorkerProcesses;
let ws: string;
const answered2xx: string[] = [];
/** What the receiver does with the n-th request (0-based) it sees for a delivery id: answer a status, or hold it open for ever. */
let script: (deliveryId: string, n: number) => number | 'hold' = () => 200;
const seen = new Map<string, number>();
let held: (deliveryId: string) => void = () => undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  ws = await createWorkspace(db.orm);
  const caFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-ca-')), 'ca.pem');
  fs.writeFileSync(caFile, createTestPki().ca);
  workers = new WorkerProcesses(`crash-${randomBytes(4).toString('hex')}`, {
    DATABASE_URL: db.url,
    CONCIERGE_ENCRYPTION_KEY: KEY,
    CONCIERGE_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    CONCIERGE_WEBHOOK_BACKOFF_MS: '200,200,200,200,200',
    CONCIERGE_WEBHOOK_TIMEOUT_MS: '2000',
    // The standard way to trust a private CA: read by Node at process start.
    NODE_EXTRA_CA_CERTS: caFile,
  });
  await workers.registerNamespace();
  receiver = await startHttpsReceiver({
    handler: (req, res) => {
      const id = String(req.headers['x-concierge-delivery']);
      const n = seen.get(id) ?? 0;
      seen.set(id, n + 1);
      const action = script(id, n);
      if (action === 'hold') {
        // Never answered: the worker dies while waiting for this response.
        held(id);
        return;
      }
      if (action >= 200 && action < 300) answered2xx.push(id);
      res.writeHead(action).end('ok');
    },
  });
});
afterAll(async () => {
  await workers.stopAll();
  await receiver.close();
  await db.drop();
});

const deliveryStatus = async (id: string) =>
  (await db.orm.em.fork().execute<{ status: string }[]>('select status from webhook_deliveries where id = ?', [id]))[0].status;
const attemptLog = async (id: string) =>
  (await db.orm.em.fork().execute<{ attempt: number; status_code: number | null }[]>('select attempt, status_code from webhook_attempts where delivery_id = ? order by attempt', [id])).map(
    (a) => [a.attempt, a.status_code],
  );
const heldOnce = () => new Promise<string>((resolve) => (held = resolve));

async function emitOne(messageId: string): Promise<string> {
  const { deliveryIds } = await db.orm.em.fork().transactional((tx) => webhooks.emitEvent(tx, ws, 'message.inbound', { message_id: messageId }));
  expect(deliveryIds).toHaveLength(1);
  return deliveryIds[0];
}

/** The worker dies while the receiver holds the delivery's request; another worker is started and must deliver it, with one 2xx. */
async function killAndRecover(worker: ChildProcess, holding: Promise<string>, deliveryId: string): Promise<void> {
  expect(await holding).toBe(deliveryId);
  await workers.kill(worker);
  expect(await deliveryStatus(deliveryId)).toBe('pending');
  await workers.start();
  await eventually(60_000, 'the delivery to complete after the restart', async () => (await deliveryStatus(deliveryId)) === 'delivered');
  expect(answered2xx).toEqual([deliveryId]);
}

beforeAll(async () => {
  const c = await testServices(db, { box: SecretBox.fromString(KEY) });
  await c.services.subscriptions.create(ws, `${receiver.url}/hook`, ['message.inbound']);
});

test("a worker killed during the outbox dispatcher's first attempt: the lease expires, the delivery is taken again, exactly one 2xx", async () => {
  // The event is committed while no worker (and so no dispatcher) runs at all:
  // a crash right after the business write must lose nothing.
  const deliveryId = await emitOne('msg_crash_inline');
  script = (_id, n) => (n === 0 ? 'hold' : 200);
  const holding = heldOnce();

  await killAndRecover(await workers.start(), holding, deliveryId);
  expect(seen.get(deliveryId)).toBe(2);
  // The lost attempt never reached the log; the one that succeeded is attempt 1, made by the dispatcher again.
  expect(await attemptLog(deliveryId)).toEqual([[1, 200]]);
  // Give a duplicate a moment to show up, if the design allowed one.
  await new Promise((r) => setTimeout(r, 1_000));
  expect(answered2xx).toEqual([deliveryId]);
  await workers.stopAll();
}, 90_000);

test('a worker killed during a retry (attempt 2, in the retry workflow): the attempt times out, attempt 3 delivers, exactly one 2xx', async () => {
  answered2xx.length = 0;
  script = (_id, n) => (n === 0 ? 500 : n === 1 ? 'hold' : 200);
  const holding = heldOnce();
  const first = await workers.start();
  const deliveryId = await emitOne('msg_crash_retry');
  await killAndRecover(first, holding, deliveryId);
  expect(seen.get(deliveryId)).toBe(3);
  // Attempt 1 from the dispatcher, attempt 2 lost with the worker (never logged), attempt 3 from the workflow.
  expect(await attemptLog(deliveryId)).toEqual([
    [1, 500],
    [3, 200],
  ]);
  await new Promise((r) => setTimeout(r, 1_000));
  expect(answered2xx).toEqual([deliveryId]);
}, 90_000);
