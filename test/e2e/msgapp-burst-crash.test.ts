import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SecretBox } from '../../lib/crypto/secret-box';
import { newId } from '../../lib/ids';
import { signHubPayload } from '../../providers/msgapp/webhook';
import { createTestPki, startHttpsReceiver, type HttpsReceiver } from '../../dev/fakes/tls';
import { createWorkspace, testServices } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { LOG_LEVEL, testLogFile } from '../support/secret-log';
import { eventually, WorkerProcesses } from '../support/worker-process';

/**
 * The whole service (`npm start`: its main process and its relay process) SIGKILLed in the middle of a burst of
 * 500 inbound msgapp messages. The carrier does what Meta does: a POST that is not answered 200 is sent again until
 * it is. Every message is stored exactly once, and its `message.inbound` reaches the subscriber under one delivery
 * id (a delivery repeated after the crash is the same delivery, which the subscriber can drop).
 */
const ROOT = path.resolve(__dirname, '../..');
const KEY = randomBytes(32).toString('hex');
const APP_SECRET = 'burst-app-secret';
const PHONE_NUMBER_ID = '8808';
const MESSAGES = 500;
const KILL_AFTER_ACKS = 150;

let db: TestDatabase;
let receiver: HttpsReceiver;
let ws: string;
let namespace: string;
let port: number;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-burst-crash-'));
/** Each message.inbound the subscriber got: its text and delivery id. */
const receipts: Array<{ text: string; delivery: string }> = [];
const services: ChildProcess[] = [];

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const p = (server.address() as net.AddressInfo).port;
  await new Promise((r) => server.close(r));
  return p;
}

/** `npm start` (bin/start.ts) on the test's PostgreSQL and Temporal, in a process group of its own; resolves once it serves. */
function startService(): Promise<ChildProcess> {
  const caFile = path.join(dataDir, 'ca.pem');
  const child = spawn(process.execPath, ['--import', 'tsx', 'bin/start.ts'], {
    cwd: ROOT,
    detached: true,
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: db.url,
      TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS,
      TEMPORAL_NAMESPACE: namespace,
      TEMPORAL_TASK_QUEUE: namespace,
      TEMPORAL_WORKFLOW_BUNDLE: process.env.TEST_WORKFLOW_BUNDLE,
      CONCIERGE_ENCRYPTION_KEY: KEY,
      CONCIERGE_DATA_DIR: dataDir,
      // A provider is configured (no sandbox); a text message never calls it.
      MSGAPP_API_BASE: 'http://127.0.0.1:9',
      MSGAPP_APP_SECRET: APP_SECRET,
      MSGAPP_VERIFY_TOKEN: 'burst',
      CONCIERGE_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
      NODE_EXTRA_CA_CERTS: caFile,
      LOG_LEVEL,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  services.push(child);
  const logFile = testLogFile(`service-${child.pid}`);
  const log = logFile ? fs.createWriteStream(logFile, { flags: 'a' }) : null;
  child.once('close', () => log?.end());
  let output = '';
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      log?.write(d);
      output += d.toString();
      if (/\[concierge\] API:/.test(output)) resolve(child);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, signal) => reject(new Error(`the service exited (${signal ?? code}) before it served:\n${output.slice(-3000)}`)));
  });
}

/** SIGKILL to the service's whole process group: its main process and its relay die at once, as in a power cut. */
async function killService(child: ChildProcess): Promise<void> {
  const gone = new Promise((r) => child.once('exit', r));
  process.kill(-child.pid!, 'SIGKILL');
  await gone;
  // The relay is in the group: wait until no process of it is left.
  await eventually(10_000, 'the relay to be gone', async () => {
    try {
      process.kill(-child.pid!, 0);
      return false;
    } catch {
      return true;
    }
  });
}

beforeAll(async () => {
  db = await createTestDatabase();
  ws = await createWorkspace(db.orm);
  const pki = createTestPki();
  fs.writeFileSync(path.join(dataDir, 'ca.pem'), pki.ca);
  receiver = await startHttpsReceiver({
    pki,
    handler: (req, res) => {
      res.writeHead(200).end('ok');
      receiver.hits.length = 0;
      receipts.push({ text: String(JSON.parse(req.rawBody.toString('utf8')).data?.text), delivery: String(req.headers['x-concierge-delivery']) });
    },
  });
  namespace = `burstcrash-${randomBytes(4).toString('hex')}`;
  await new WorkerProcesses(namespace, {}).registerNamespace();
  port = await freePort();
  // The number's agent (published, no sender action: no agent turn runs) and the subscription, sealed with the service's key.
  await db.orm.em
    .fork()
    .execute(`insert into agents (id, workspace_id, name, status, spec) values (?, ?, 'Burst', 'published', ?::jsonb)`, [
      newId('agt'),
      ws,
      JSON.stringify({ triggers: { msgapp: { number: '+15550008808', phone_number_id: PHONE_NUMBER_ID } } }),
    ]);
  const c = await testServices(db, { box: SecretBox.fromString(KEY) });
  try {
    await c.services.subscriptions.create(ws, `${receiver.url}/hook`, ['message.inbound']);
  } finally {
    await c.close();
  }
}, 120_000);

afterAll(async () => {
  for (const s of services) {
    try {
      process.kill(-s.pid!, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  await receiver?.close();
  await db?.drop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

test(`the whole service SIGKILLed during a burst of ${MESSAGES} inbound messages: each stored once, each event delivered under one delivery id`, async () => {
  let service = await startService();
  const messages = Array.from({ length: MESSAGES }, (_, i) => {
    const wamid = `wamid.burst.${i}.${randomBytes(4).toString('hex')}`;
    const text = `[burst ${i}] Where is my order?`;
    const from = `15553${String(i % 100).padStart(6, '0')}`;
    const body = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [{ id: 'waba', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550008808', phone_number_id: PHONE_NUMBER_ID }, contacts: [{ profile: { name: 'Burst' }, wa_id: from }], messages: [{ from, id: wamid, timestamp: String(Math.floor(Date.now() / 1000)), type: 'text', text: { body: text } }] } }] }],
    });
    return { wamid, text, body };
  });

  // The carrier: 16 connections; a POST not answered 200 (refused, reset, 5xx) is sent again 200 ms later, until it is.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  let acks = 0;
  let attempts = 0;
  const post = (body: string) =>
    new Promise<number>((resolve) => {
      attempts++;
      const req = http.request({ method: 'POST', host: '127.0.0.1', port, path: '/webhooks/msgapp', agent, headers: { 'content-type': 'application/json', 'x-hub-signature-256': signHubPayload(body, APP_SECRET) } });
      req.on('error', () => resolve(0));
      req.setTimeout(10_000, () => req.destroy());
      req.on('response', (res) => res.resume().on('end', () => resolve(res.statusCode ?? 0)));
      req.end(body);
    });
  const deliver = async (body: string) => {
    for (;;) {
      if ((await post(body)) === 200) return void acks++;
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  let next = 0;
  const lanes = Array.from({ length: 16 }, async () => {
    while (next < messages.length) await deliver(messages[next++].body);
  });

  // Mid-burst, the power goes: both processes die at once. A new service starts on the same port.
  await eventually(60_000, `${KILL_AFTER_ACKS} acknowledgements`, async () => acks >= KILL_AFTER_ACKS);
  await killService(service);
  const acksAtCrash = acks;
  service = await startService();
  await Promise.all(lanes);
  agent.destroy();
  expect(acksAtCrash).toBeLessThan(MESSAGES);
  expect(attempts).toBeGreaterThan(MESSAGES);

  const texts = new Set(messages.map((m) => m.text));
  await eventually(120_000, 'every message.inbound at the subscriber', async () => new Set(receipts.map((r) => r.text).filter((t) => texts.has(t))).size === MESSAGES);
  const em = db.orm.em.fork();
  // Every message stored once (its event row and its message), and its event emitted once, with one delivery.
  const [counts] = await em.execute<Array<{ events: string; messages: string; distinct_messages: string; emitted: string; deliveries: string }>>(
    `select (select count(*) from msgapp_inbound_events where provider_message_id like 'wamid.burst.%') as events,
            (select count(*) from messages where provider_message_id like 'wamid.burst.%') as messages,
            (select count(distinct provider_message_id) from messages where provider_message_id like 'wamid.burst.%') as distinct_messages,
            (select count(*) from webhook_events where workspace_id = ? and type = 'message.inbound') as emitted,
            (select count(*) from webhook_deliveries where workspace_id = ?) as deliveries`,
    [ws, ws],
  );
  expect(counts).toEqual({ events: String(MESSAGES), messages: String(MESSAGES), distinct_messages: String(MESSAGES), emitted: String(MESSAGES), deliveries: String(MESSAGES) });
  // At the subscriber: a message's event under one delivery id however often it came (at least once, never as two).
  const idsByText = new Map<string, Set<string>>();
  for (const r of receipts) idsByText.set(r.text, (idsByText.get(r.text) ?? new Set()).add(r.delivery));
  expect([...idsByText.entries()].filter(([t, ids]) => texts.has(t) && ids.size !== 1)).toEqual([]);
  await killService(service);
}, 240_000);
