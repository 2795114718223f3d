import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SecretBox } from '../../core/crypto/secret-box';
import { emitEvent } from '../../core/webhooks/emitter';
import { createWorkspace, testServices } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { createTestPki, startHttpsReceiver, type HttpsReceiver } from '../support/tls';
import { eventually, WorkerProcesses } from '../support/worker-process';

const KEY = randomBytes(32).toString('hex');

let db: TestDatabase;
let receiver: HttpsReceiver;
let workers: WorkerProcesses;
let ws: string;
const answered2xx: string[] = [];
let holdFirst = true;
let firstHit: () => void;
const firstHitSeen = new Promise<void>((resolve) => (firstHit = resolve));

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
  await workers.stopAll();
  await receiver.close();
  await db.drop();
});

const deliveryStatus = async (id: string) =>
  (await db.orm.em.fork().execute<{ status: string }[]>('select status from webhook_deliveries where id = ?', [id]))[0].status;

test('a worker killed mid-delivery: the delivery completes after a restart, with exactly one 2xx per delivery id', async () => {
  const c = await testServices(db, { box: SecretBox.fromString(KEY) });
  const { services } = c;
  await services.subscriptions.create(ws, `${receiver.url}/hook`, ['message.inbound']);

  // The event is committed while no worker (and so no dispatcher) runs at all:
  // a crash right after the business write must lose nothing.
  const { deliveryIds } = await db.orm.em.fork().transactional((tx) => emitEvent(tx, ws, 'message.inbound', { message_id: 'msg_crash' }));
  expect(deliveryIds).toHaveLength(1);
  const [deliveryId] = deliveryIds;

  const first = await workers.start();
  await firstHitSeen;
  await workers.kill(first);
  expect(await deliveryStatus(deliveryId)).toBe('pending');

  await workers.start();
  await eventually(60_000, 'the delivery to complete after the restart', async () => (await deliveryStatus(deliveryId)) === 'delivered');
  expect(answered2xx).toEqual([deliveryId]);
  expect(receiver.hits.length).toBeGreaterThanOrEqual(2);
  expect(new Set(receiver.hits.map((h) => h.headers['x-concierge-delivery']))).toEqual(new Set([deliveryId]));
  // Give a duplicate a moment to show up, if the design allowed one.
  await new Promise((r) => setTimeout(r, 1_000));
  expect(answered2xx).toEqual([deliveryId]);
}, 90_000);
