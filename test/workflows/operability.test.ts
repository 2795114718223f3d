import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { Client as PgClient } from 'pg';
import { WorkflowFailedError } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import * as workflowTypes from '../../workflows';
import { BlobHold, Call, StructuredExtraction, VoiceSession } from '../../db/entities';
import { newId } from '../../lib/ids';
import { extractorFromConfig, transcriberFromConfig } from '../../app/extractor';
import type { ExtractFn } from '../../domain/kb/indexing';
import { CloudApiProvider } from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { STRANDED } from '../../activities/maintenance';
import { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { deliveryWorkflowId, indexWorkflowId, kbIndexing, msgappInbound, webhookDeliveries } from '../../worker/outbox-sources';
import { OUTCOME } from '../../worker/namespace-attributes';
import { INDEXING_CANCELLED } from '../../workflows/kb-index';
import { SEND_CANCELLED, messageSendWorkflowId } from '../../workflows/message-send';
import { DELIVERY_CANCELLED } from '../../workflows/webhook-delivery';
import { UPLOAD_CANCELLED, widgetUploadWorkflowId } from '../../workflows/widget-upload';
import { bearer, createKey, createWorkspace, MODELS_DIR, startTestApp, testBlobs, testConfig, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { multipart, upload as kbUpload } from '../support/kb';
import { makeCorruptPdf, makeWav } from '../../dev/fakes/documents';
import { inboundDone } from '../support/msgapp';
import { testLogger } from '../support/secret-log';
import { historySummaries, maybeRecordHistory, startTestWorker, workflowResult, type TestWorker } from '../support/temporal';
import { startHttpsReceiver, type HttpsReceiver } from '../../dev/fakes/tls';

/**
 * Issue 14's operability guarantees, on the real dev server: every workflow of a
 * workspace is found by `ConciergeWorkspaceId`; cancelling a delivery, an indexing run,
 * a send or an upload's extraction leaves its record final with a reason; a record
 * stranded by `terminate` is settled by the maintenance reconciliation; a reset delivery
 * keeps its counts.
 */

let db: TestDatabase;
let sandbox: MsgappSandbox;
let proxy: { url: string; close(): Promise<void> };
let t: TestApp;
let tw: TestWorker;
let relay: OutboxDispatcher;
let ws: string;
let auth: Record<string, string>;
let credentialId: string;
let site: { site_id: string; site_secret: string };
let receiver: HttpsReceiver;
/** What the webhook receiver answers. */
let receiverStatus = 204;
/** Set: the receiver answers 503 to the first request of each delivery id (its first attempt, the dispatcher's), so the delivery needs its retry workflow. */
let failFirstAttempts = false;
const seenDeliveries = new Set<string>();

const NUMBER = '+15550002222';
const CODEC_TOKEN = 'c'.repeat(40);
const PHONE_NUMBER_ID = '2077';
/** A recipient whose sends the provider proxy holds open: the send waits in the provider call's retries. */
const HANGING_RECIPIENT = '+15559990000';
const ORIGIN = 'https://shop.example';
/** Waits between delivery attempts: the third attempt is followed by a long wait, in which tests cancel, terminate or reset. */
const BACKOFF = [50, 50, 60_000, 60_000, 60_000];

/** Extraction of files named `hang…` waits for this gate (released in afterAll), so a test can cancel it mid-way. */
let releaseHang: () => void = () => undefined;
const hang = new Promise<void>((resolve) => (releaseHang = resolve));

/** The Cloud API sandbox behind a proxy that never answers sends to HANGING_RECIPIENT (released in afterAll). */
async function startProviderProxy(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const held: http.ServerResponse[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    if (body.includes(HANGING_RECIPIENT.slice(1))) {
      held.push(res);
      return;
    }
    const upstream = await fetch(`${target}${req.url!.replace(/^\/[^/]+/, '')}`, {
      method: req.method,
      headers: Object.fromEntries(Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k))) as Record<string, string>,
      body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
    });
    res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
    res.end(Buffer.from(await upstream.arrayBuffer()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const version = new URL(target).pathname;
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${version}`,
    close: async () => {
      for (const r of held) r.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startMsgappSandbox({ appSecret: 'app-secret', accessToken: 'sandbox-token', statusDelaysMs: { delivered: 20, read: 40 } });
  proxy = await startProviderProxy(sandbox.url);
  const real = extractorFromConfig(testConfig(), null);
  const extract: ExtractFn = async (input) => {
    if (input.fileName.startsWith('hang')) await hang;
    return real(input);
  };
  // The embedded transcriber (voice notes are transcribed in the worker; the API only checks one exists).
  const transcriber = transcriberFromConfig(testConfig({ CONCIERGE_MODELS_DIR: MODELS_DIR }));
  tw = await startTestWorker(db, { msgapp: new CloudApiProvider({ baseUrl: proxy.url, timeoutMs: 60_000 }), extract, uploadIndexChars: 500, transcriber });
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions: { msgapp: new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 }), uploadIndexChars: 500, extract, transcriber },
    temporal: { client: tw.client, taskQueue: tw.taskQueue },
    msgappWebhook: { appSecret: 'app-secret', verifyToken: 'verify-me' },
    // The runbook's `temporal workflow metadata` decodes through the codec endpoint.
    config: { TEMPORAL_CODEC_TOKEN: CODEC_TOKEN },
  });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  sandbox.setWebhookUrl(`http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/webhooks/msgapp`);
  // The worker's relay, as worker/runtime.ts runs it: indexing, inbound messages, deliveries.
  relay = new OutboxDispatcher(
    tw.composition.notifications!,
    [
      kbIndexing(tw.composition.em, tw.client, { taskQueue: tw.taskQueue }),
      msgappInbound(tw.composition.services.providerEvents, tw.client, { taskQueue: tw.taskQueue, actor: tw.composition.workflows!.conversations }),
      webhookDeliveries(t.services.deliveries, tw.client, { taskQueue: tw.taskQueue, backoffMs: BACKOFF, timeoutMs: 2_000 }),
    ],
    testLogger(),
    500,
  );
  await relay.start();
  receiver = await startHttpsReceiver({
    handler: (req, res) => {
      const id = String(req.headers['x-concierge-delivery']);
      const first = !seenDeliveries.has(id);
      seenDeliveries.add(id);
      res.writeHead(failFirstAttempts && first ? 503 : receiverStatus).end();
    },
  });

  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write', 'conversations:read', 'conversations:write', 'workflows:write', 'workflows:publish', 'webhooks:read', 'webhooks:write'])).key);
  credentialId = (await t.services.credentials.create(ws, 'msgapp_access_token', 'sandbox number', 'sandbox-token')).id;
  const agent = async (payload: Record<string, unknown>) => {
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { instructions: 'Help.', ...payload } });
    expect(res.statusCode).toBe(201);
    const id = res.json().id as string;
    expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${id}/publish`, headers: auth })).statusCode).toBe(200);
    return id;
  };
  await agent({
    name: 'Sender',
    triggers: { msgapp: { number: NUMBER, phone_number_id: PHONE_NUMBER_ID, credential_id: credentialId } },
    actions: [{ type: 'sender' }],
    templates: [{ name: 'order_update', language: 'en', body: 'Order {{1}} shipped.', status: 'approved' }],
  });
  const chat = await agent({ name: 'Widget', triggers: { web_chat: { allowed_origins: [ORIGIN], file_upload: true } } });
  site = await t.services.sites.create(ws, chat, [ORIGIN]);
}, 60_000);

afterAll(async () => {
  releaseHang();
  await relay.stop();
  await proxy.close();
  await t.close();
  await tw.close();
  await receiver.close();
  await sandbox.close();
  await db.drop();
});

const widget = (url: string, payload: object) =>
  t.app.inject({ method: 'POST', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': site.site_id, origin: ORIGIN }, payload });
const widgetUpload = (name: string, content: string, conversationId: string) => {
  const body = multipart([
    { name: 'conversation_id', value: conversationId },
    { name: 'file', value: content, filename: name, type: 'text/plain' },
  ]);
  return t.app.inject({ method: 'POST', url: '/api/public/widget/upload', headers: { 'x-concierge-site': site.site_id, origin: ORIGIN, ...body.headers }, payload: body.payload });
};
const sendTemplate = (to: string) =>
  t.app.inject({ method: 'POST', url: '/api/v1/messages', headers: auth, payload: { from: NUMBER, to, template: { name: 'order_update', variables: ['A-1'] } } });
const subscribe = async () => {
  const res = await t.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers: auth, payload: { url: receiver.url, events: ['message.inbound'] } });
  expect(res.statusCode).toBe(201);
  return res.json().id as string;
};

async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Bytes committed to the test run's blob store (the one the app and the worker share); their key. */
const storeBytes = async (bytes: Buffer) => testBlobs.commit(await testBlobs.stage(Readable.from([bytes]), bytes.length));
const row = async <T = Record<string, unknown>>(sql: string, params: unknown[]) => (await db.orm.em.fork().execute<T[]>(sql, params))[0];
const cancelledRun = async (workflowId: string) => {
  const err = await tw.client.workflow
    .getHandle(workflowId)
    .result()
    .then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(WorkflowFailedError);
  expect((err as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
};

/** A pending delivery of a fresh subscription whose workflow sits in the long wait after 3 failed attempts. */
async function deliveryWaiting(): Promise<{ subscriptionId: string; deliveryId: string }> {
  receiverStatus = 500;
  const subscriptionId = await subscribe();
  const { providerMessageId } = await sandbox.injectInbound({ from: '+15557770101', to: PHONE_NUMBER_ID, text: 'hello' });
  await inboundDone(tw, providerMessageId);
  const d = await until(
    'a delivery at its 3rd attempt',
    () => row<{ id: string; attempt_count: number }>('select id, attempt_count from webhook_deliveries where subscription_id = ?', [subscriptionId]),
    (r) => r?.attempt_count === 3,
  );
  return { subscriptionId, deliveryId: d.id };
}

/** Ids made by the first test, for the runbook's commands (docs/operations.md, "Operating workflows"). */
const seen = { subscription: '', file: '', conversation: '', message: '' };

const delivery = async (subscriptionId: string, deliveryId: string) =>
  (await t.app.inject({ method: 'GET', url: `/api/v1/webhook-subscriptions/${subscriptionId}/deliveries/${deliveryId}`, headers: auth })).json();

describe('search attributes', () => {
  test('ConciergeWorkspaceId finds every workflow type that belongs to a workspace, each labelled by its static summary', async () => {
    receiverStatus = 204;
    // Only a delivery whose first attempt failed has a (retry) workflow: this one's first attempt fails.
    failFirstAttempts = true;
    const subscriptionId = await subscribe();
    // Knowledge base: kb-index.
    const file = (await kbUpload(t.app, auth, { filename: 'returns-policy.txt', content: 'Returns are accepted within 30 days of delivery.' })).json();
    expect(await workflowResult(tw.client, indexWorkflowId(file.id))).toEqual({ status: 'active', outcome: 'succeeded' });
    // msgapp: message-send, msgapp-inbound (a message with media: a text message is recorded by the webhook, with no
    // workflow of its own), and the retry workflow of its message.inbound's delivery.
    const sent = await sendTemplate('+15557771234');
    expect(sent.statusCode).toBe(201);
    const { providerMessageId } = await sandbox.injectInbound({
      from: '+15557771234',
      to: PHONE_NUMBER_ID,
      text: 'thanks',
      media: { kind: 'document', mimeType: 'text/plain', bytes: Buffer.from('Receipt for order 1234.'), filename: 'receipt.txt' },
    });
    expect((await inboundDone(tw, providerMessageId)).status).toBe('recorded');
    await until('the delivery', () => row<{ status: string }>('select status from webhook_deliveries where subscription_id = ?', [subscriptionId]), (r) => r?.status === 'delivered');
    failFirstAttempts = false;
    // Widget: an upload (widget-upload), then a send with a long attachment: the conversation and its task child.
    const conv = (await widget('init', {})).json() as { conversation_id: string };
    const up = await widgetUpload('notes.txt', 'Opening hours: 9 to 5.', conv.conversation_id);
    expect(up.statusCode).toBe(201);
    const longId = newId('upl');
    const content = Array.from({ length: 30 }, (_, i) => `Clause ${i}: deposits are returned within ${i + 10} days.`).join('\n');
    await db.orm.em
      .fork()
      .execute(
        `insert into widget_uploads (id, workspace_id, site_id, conversation_id, file_name, mime_type, size_bytes, blob_key, status, content, parsed_chars)
         values (?, ?, ?, ?, 'lease.txt', 'text/plain', ?, 'none', 'ready', ?, ?)`,
        [longId, ws, site.site_id, conv.conversation_id, content.length, content, content.length],
      );
    const reply = await widget('send', { conversation_id: conv.conversation_id, text: 'when is the deposit returned?', file_refs: [longId] });
    expect(reply.statusCode).toBe(200);

    // A voice note: transcribe (silence, so the worker answers at once, without the model: 422).
    const silence = makeWav(500);
    silence.fill(0, 44);
    const noteBody = multipart([{ name: 'file', value: silence, filename: 'note.wav', type: 'audio/wav' }]);
    const note = await t.app.inject({ method: 'POST', url: '/api/public/widget/transcribe', headers: { 'x-concierge-site': site.site_id, origin: ORIGIN, ...noteBody.headers }, payload: noteBody.payload });
    expect(note.json().error).toBe('empty_transcript');

    // Every workflow type but the installation-wide maintenance ones belongs to a workspace. (Structured
    // extraction needs a model, voice sessions and calls speech: test/api/extract-structured.test.ts,
    // test/api/voice.test.ts and test/api/calls.test.ts check their search attributes.)
    const expected = Object.keys(workflowTypes)
      .filter((name) => !['purgeExpiredWorkflow', 'reconcileStrandedWorkflow', 'structuredExtractionWorkflow', 'voiceSessionWorkflow', 'callWorkflow'].includes(name))
      .sort();
    expect(expected).toHaveLength(8);
    const listed = await until(
      'every workflow type in the workspace listing',
      async () => {
        const found = new Map<string, string>();
        for await (const w of tw.client.workflow.list({ query: `ConciergeWorkspaceId = '${ws}'` })) found.set(w.type, w.workflowId);
        return found;
      },
      (found) => expected.every((type) => found.has(type)),
    );
    expect([...listed.keys()].sort()).toEqual(expected);

    Object.assign(seen, { subscription: subscriptionId, file: file.id, conversation: conv.conversation_id, message: sent.json().id });
    const summary = async (workflowId: string) => (await tw.client.workflow.getHandle(workflowId).describe()).staticSummary();
    expect(await summary(indexWorkflowId(file.id))).toBe('returns-policy.txt');
    expect(await summary(messageSendWorkflowId(sent.json().id))).toBe('template order_update → …1234');
    expect(await summary(`msgapp-inbound:${providerMessageId}`)).toBe('inbound document from …1234');
    expect(await summary(widgetUploadWorkflowId(up.json().upload_id))).toBe('notes.txt (text)');
    expect(await summary(`conversation:${conv.conversation_id}:task:index:${longId}`)).toBe('Reading lease.txt');
    expect(await summary(`conversation:${conv.conversation_id}`)).toBe('web chat conversation');
    // Summaries on the steps, current details, handler descriptions.
    const actor = tw.client.workflow.getHandle(`conversation:${conv.conversation_id}`);
    const meta = await actor.query<{ currentDetails?: string; definition?: { updateDefinitions?: Array<{ name: string; description?: string }> } }>('__temporal_workflow_metadata');
    expect(meta.currentDetails).toMatch(/Turns this run: 1/);
    expect(meta.definition?.updateDefinitions?.find((u) => u.name === 'visitorMessage')?.description).toMatch(/POST \/send/);
    const summaries = await historySummaries(tw.client, `conversation:${conv.conversation_id}`);
    expect(summaries).toEqual(expect.arrayContaining([`task started: index:${longId}`, 'Reading lease.txt', `task completed: index:${longId}`]));
    expect(summaries.some((s) => s.startsWith('turn: answer msg_'))).toBe(true);
  }, 60_000);
});

describe('cancel leaves every record final, with a reason', () => {
  test('a delivery waiting between attempts: failed with the reason, the subscription not counted; POST …/retry then delivers it', async () => {
    const { subscriptionId, deliveryId } = await deliveryWaiting();
    await tw.client.workflow.getHandle(deliveryWorkflowId(deliveryId)).cancel();
    await cancelledRun(deliveryWorkflowId(deliveryId));
    expect(await delivery(subscriptionId, deliveryId)).toMatchObject({ status: 'failed', last_error: DELIVERY_CANCELLED, attempt_count: 3 });
    const sub = (await t.app.inject({ method: 'GET', url: '/api/v1/webhook-subscriptions', headers: auth })).json().subscriptions.find((s: { id: string }) => s.id === subscriptionId);
    expect(sub.consecutive_failures).toBe(0);
    receiverStatus = 204;
    const retried = await t.app.inject({ method: 'POST', url: `/api/v1/webhook-subscriptions/${subscriptionId}/deliveries/${deliveryId}/retry`, headers: auth });
    expect(retried.statusCode).toBe(202);
    const done = await until('the retried delivery', () => delivery(subscriptionId, deliveryId), (d) => d.status === 'delivered');
    expect(done.attempts.at(-1)).toMatchObject({ run: 2, attempt: 1, status_code: 204 });
  }, 40_000);

  test('an indexing run: the file ends in error with the reason (never processing)', async () => {
    const file = (await kbUpload(t.app, auth, { filename: 'hang-manual.txt', content: 'A manual that takes for ever to read.' })).json();
    await until('processing', () => row<{ status: string }>('select status from kb_files where id = ?', [file.id]), (r) => r.status === 'processing');
    await tw.client.workflow.getHandle(indexWorkflowId(file.id)).cancel();
    await cancelledRun(indexWorkflowId(file.id));
    const read = (await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${file.id}`, headers: auth })).json();
    expect(read).toMatchObject({ status: 'error', error_message: INDEXING_CANCELLED });
  });

  test('a send waiting on the provider: the message is failed with the reason and POST /messages answers 502 with its id', async () => {
    const sending = sendTemplate(HANGING_RECIPIENT);
    const msg = await until('the recorded message', () => row<{ id: string }>(`select id from messages where to_number = ? and status = 'sending'`, [HANGING_RECIPIENT]), (r) => !!r);
    await tw.client.workflow.getHandle(messageSendWorkflowId(msg.id)).cancel();
    const res = await sending;
    expect(res.statusCode).toBe(502);
    expect(res.json()).toMatchObject({ error: 'provider_error', message_id: msg.id });
    const read = (await t.app.inject({ method: 'GET', url: `/api/v1/messages/${msg.id}`, headers: auth })).json();
    expect(read).toMatchObject({ status: 'failed', error: SEND_CANCELLED });
  });

  test("an upload's extraction: POST /upload answers 409 upload_cancelled (not 'still processing'), and the upload reads back in error with the reason", async () => {
    const conv = (await widget('init', {})).json() as { conversation_id: string };
    const posting = widgetUpload('hang-scan.txt', 'slow to read', conv.conversation_id);
    const up = await until('the stored upload', () => row<{ id: string }>(`select id from widget_uploads where file_name = 'hang-scan.txt'`, []), (r) => !!r);
    await until('its workflow', () => tw.client.workflow.getHandle(widgetUploadWorkflowId(up.id)).describe().then(() => true, () => false), Boolean);
    await tw.client.workflow.getHandle(widgetUploadWorkflowId(up.id)).cancel();
    const answered = await posting;
    expect(answered.statusCode).toBe(409);
    expect(answered.json()).toEqual({ error: 'upload_cancelled', message: `The upload's ${UPLOAD_CANCELLED}`, upload_id: up.id });
    const status = await t.app.inject({
      method: 'GET',
      url: `/api/public/widget/upload/${up.id}?conversation_id=${conv.conversation_id}`,
      headers: { 'x-concierge-site': site.site_id, origin: ORIGIN },
    });
    expect(status.json()).toMatchObject({ status: 'error', error_message: UPLOAD_CANCELLED });
  });

  test('a conversation actor with a running task: the task is recorded cancelled (the widget lists nothing running), the next send starts a new run', async () => {
    const conv = (await widget('init', {})).json() as { conversation_id: string };
    const longId = newId('upl');
    const content = Array.from({ length: 30 }, (_, i) => `Clause ${i}: rent is due on day ${i + 1}.`).join('\n');
    await db.orm.em
      .fork()
      .execute(
        `insert into widget_uploads (id, workspace_id, site_id, conversation_id, file_name, mime_type, size_bytes, blob_key, status, content, parsed_chars)
         values (?, ?, ?, ?, 'contract.txt', 'text/plain', ?, 'none', 'ready', ?, ?)`,
        [longId, ws, site.site_id, conv.conversation_id, content.length, content, content.length],
      );
    // Hold the task's write so it is still running when the actor is cancelled.
    const blocker = new PgClient({ connectionString: db.url });
    await blocker.connect();
    await blocker.query('begin');
    await blocker.query('lock table widget_upload_chunks in exclusive mode');
    try {
      const sent = await widget('send', { conversation_id: conv.conversation_id, text: 'summarise it', file_refs: [longId], delivery: 'async' });
      expect(sent.statusCode).toBe(202);
      const tasks = () => row<{ status: string }>('select status from conversation_tasks where conversation_id = ?', [conv.conversation_id]);
      await until('the running task', tasks, (r) => r?.status === 'running');
      await tw.client.workflow.getHandle(`conversation:${conv.conversation_id}`).cancel();
      await cancelledRun(`conversation:${conv.conversation_id}`);
      expect((await tasks()).status).toBe('cancelled');
    } finally {
      await blocker.query('rollback');
      await blocker.end();
    }
    const listed = await t.app.inject({
      method: 'GET',
      url: `/api/public/widget/tasks?conversation_id=${conv.conversation_id}`,
      headers: { 'x-concierge-site': site.site_id, origin: ORIGIN },
    });
    expect(listed.json()).toEqual({ tasks: [] });
    const next = await widget('send', { conversation_id: conv.conversation_id, text: 'hello again' });
    expect(next.statusCode).toBe(200);
  }, 40_000);
});

describe('terminate, reconcile, reset', () => {
  test('records stranded by terminate (which runs no code) are settled by the maintenance reconciliation', async () => {
    const { subscriptionId, deliveryId } = await deliveryWaiting();
    const file = (await kbUpload(t.app, auth, { filename: 'hang-terminated.txt', content: 'never read' })).json();
    await until('processing', () => row<{ status: string }>('select status from kb_files where id = ?', [file.id]), (r) => r.status === 'processing');
    const sending = sendTemplate(HANGING_RECIPIENT);
    const msg = await until('the recorded message', () => row<{ id: string }>(`select id from messages where to_number = ? and status = 'sending'`, [HANGING_RECIPIENT]), (r) => !!r);

    for (const id of [deliveryWorkflowId(deliveryId), indexWorkflowId(file.id), messageSendWorkflowId(msg.id)]) await tw.client.workflow.getHandle(id).terminate('test');
    expect((await sending).statusCode).toBe(502);
    // Nothing ran: the records are still in between.
    expect((await delivery(subscriptionId, deliveryId)).status).toBe('pending');
    expect((await row<{ status: string }>('select status from kb_files where id = ?', [file.id])).status).toBe('processing');
    expect((await row<{ status: string }>('select status from messages where id = ?', [msg.id])).status).toBe('sending');

    const workflowId = `maintenance:reconcile:${tw.taskQueue}`;
    const settled = await tw.client.workflow.execute(workflowTypes.reconcileStrandedWorkflow, { workflowId, taskQueue: tw.taskQueue, args: [{ graceMs: 0 }] });
    await maybeRecordHistory(tw.client, workflowId, 'reconcile-stranded');
    expect(settled).toMatchObject({ deliveries: 1, files: 1, messages: 1 });
    expect(await delivery(subscriptionId, deliveryId)).toMatchObject({ status: 'failed', last_error: STRANDED.delivery });
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${file.id}`, headers: auth })).json()).toMatchObject({ status: 'error', error_message: STRANDED.file });
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/messages/${msg.id}`, headers: auth })).json()).toMatchObject({ status: 'failed', error: STRANDED.message });
    // A second pass finds nothing more: running workflows and final records are left alone.
    const again = await tw.client.workflow.execute(workflowTypes.reconcileStrandedWorkflow, { workflowId: `${workflowId}:2`, taskQueue: tw.taskQueue, args: [{ graceMs: 0 }] });
    expect(again).toEqual({ deliveries: 0, deliveryRuns: 0, files: 0, messages: 0, uploads: 0, tasks: 0, voiceSessions: 0, calls: 0, extractions: 0, voiceNotes: 0 });
  }, 60_000);

  test('a voice session, a call and an extraction whose workflow is gone are settled failed with the reason, and the voice slot is free again; a voice note\'s bytes are released', async () => {
    const em = db.orm.em.fork();
    const conversationId = newId('conv');
    const agentId = newId('agt');
    const long = new Date(Date.now() - 60_000);
    const ids = { session: newId('vs'), call: newId('call'), extraction: newId('ext') };
    // As a terminated `voice:`, `call:` or `extract:` workflow leaves them: open, with no workflow to close them.
    em.create(VoiceSession, { id: ids.session, workspaceId: ws, siteId: null, conversationId, agentId, customerId: null, transport: 'direct', roomName: `room-${ids.session}`, status: 'live', connectedAt: long, createdAt: long, updatedAt: long });
    em.create(Call, { id: ids.call, workspaceId: ws, conversationId, agentId, siteId: null, phone: '+14155550100', provider: 'sip', status: 'ringing', createdAt: long, updatedAt: long });
    em.create(StructuredExtraction, { id: ids.extraction, workspaceId: ws, requestHash: ids.extraction, blobKey: 'none', fileName: 'invoice.pdf', mimeType: 'application/pdf', kind: 'pdf', schema: { type: 'object' }, status: 'running', createdAt: long, updatedAt: long });
    // A voice note held by a `transcribe:` run terminated before its release step: a hold named after the run, and its bytes.
    const noteKey = await storeBytes(Buffer.from(`voice note ${ids.session}`));
    const note = await t.services.repos.blobRefs.holdBlob(db.orm.em, noteKey, newId('trn'));
    await em.flush();
    await db.orm.em.fork().nativeUpdate(BlobHold, { id: note }, { createdAt: long });
    expect(await t.services.voice.activeCount(ws)).toBe(2);

    const settled = await tw.client.workflow.execute(workflowTypes.reconcileStrandedWorkflow, { workflowId: `maintenance:reconcile:${tw.taskQueue}:voice`, taskQueue: tw.taskQueue, args: [{ graceMs: 0 }] });
    expect(settled).toMatchObject({ voiceSessions: 1, calls: 1, extractions: 1, voiceNotes: 1 });
    expect(await row('select count(*)::int as n from blob_holds where id = ?', [note])).toEqual({ n: 0 });
    expect(await testBlobs.read(noteKey)).toBeNull();
    expect(await row('select status, end_reason from voice_sessions where id = ?', [ids.session])).toEqual({ status: 'failed', end_reason: STRANDED.voice });
    expect(await row('select status, error from calls where id = ?', [ids.call])).toEqual({ status: 'failed', error: STRANDED.call });
    expect(await row('select status, error_message from structured_extractions where id = ?', [ids.extraction])).toEqual({ status: 'failed', error_message: STRANDED.extraction });
    expect(await t.services.voice.activeCount(ws)).toBe(0);
  }, 60_000);

  test('reset of a delivery to its first workflow task re-runs its attempts without counting them twice', async () => {
    const { subscriptionId, deliveryId } = await deliveryWaiting();
    const hitsBefore = receiver.hits.length;
    // The runbook's command, against the run's dev server.
    await promisify(execFile)('temporal', [
      'workflow',
      'reset',
      '--address',
      process.env.TEST_TEMPORAL_ADDRESS!,
      '-w',
      deliveryWorkflowId(deliveryId),
      '--type',
      'FirstWorkflowTask',
      '--reason',
      'test: reset keeps counts',
    ]);
    // The new run posts its attempts 2-3 again (same delivery id: receivers deduplicate), then waits again; attempt 1
    // was the outbox dispatcher's, outside the workflow.
    await until('two more posts', async () => receiver.hits.length, (n) => n >= hitsBefore + 2);
    await new Promise((r) => setTimeout(r, 300));
    const d = await delivery(subscriptionId, deliveryId);
    expect(d.attempts).toHaveLength(3);
    expect(d).toMatchObject({ status: 'pending', attempt_count: 3 });
    await tw.client.workflow.getHandle(deliveryWorkflowId(deliveryId)).cancel();
    await until('the cancelled delivery', () => delivery(subscriptionId, deliveryId), (x) => x.status === 'failed');
  }, 60_000);
});

/** The runbook's shell commands (docs/operations.md, "Operating workflows"), as written, with the example ids replaced by real ones. */
const OPERATIONS = fs.readFileSync(path.join(__dirname, '../../docs/operations.md'), 'utf8');
const runbook = OPERATIONS.slice(OPERATIONS.indexOf('## Operating workflows'), OPERATIONS.indexOf('## Replaying histories'));
const asWritten = (command: string, ids: Record<string, string>) =>
  Object.entries(ids).reduce((c, [placeholder, id]) => c.replaceAll(placeholder, id), command);
async function sh(command: string): Promise<{ code: number; out: string }> {
  // `$T` is the test server's address, the API the test app's (the runbook's lines name npm start's).
  const api = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const env = runbook.split('\n').find((l) => l.startsWith('export TEMPORAL_CODEC_ENDPOINT='))!.replace('http://127.0.0.1:3000', api);
  const script = `T="--address ${process.env.TEST_TEMPORAL_ADDRESS}"\n${env}\n${command}`;
  return promisify(execFile)('bash', ['-c', script], { timeout: 30_000, env: { ...process.env, TEMPORAL_CODEC_TOKEN: CODEC_TOKEN } }).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
  );
}

describe('every failure one query away (issue 28)', () => {
  test("a refused send and a corrupt file end Completed with ConciergeOutcome 'failed' and the reason in their result; the runbook's one query finds both, and nothing that succeeded", async () => {
    sandbox.failNext({ kind: 'send', status: 400, code: 131030, message: 'Recipient phone number not in allowed list' });
    const refused = await sendTemplate('+15557770303');
    expect(refused.statusCode).toBe(502);
    const sendId = messageSendWorkflowId(refused.json().message_id);
    expect(await workflowResult(tw.client, sendId)).toMatchObject({ status: 'failed', outcome: 'failed', reason: expect.stringContaining('allowed list') });
    const corrupt = (await kbUpload(t.app, auth, { filename: 'broken.pdf', content: makeCorruptPdf(), type: 'application/pdf' })).json();
    expect(await workflowResult(tw.client, indexWorkflowId(corrupt.id))).toEqual({ status: 'error', outcome: 'failed', reason: expect.stringMatching(/PDF/i) });
    const described = await tw.client.workflow.getHandle(indexWorkflowId(corrupt.id)).describe();
    expect(described.status.name).toBe('COMPLETED');
    expect(described.typedSearchAttributes.get(OUTCOME)).toBe('failed');
    await maybeRecordHistory(tw.client, sendId, 'message-send-refused-outcome');
    await maybeRecordHistory(tw.client, indexWorkflowId(corrupt.id), 'kb-index-failed-outcome');

    const line = runbook.split('\n').find((l) => l.includes("ConciergeOutcome = 'failed'") && l.includes('CloseTime'));
    expect(line).toBeDefined();
    const command = asWritten(line!, { 'ws_…': ws });
    // Visibility is eventually consistent: the query is repeated until both runs are listed.
    const listed = await until('both failures in the one query', () => sh(command), (r) => r.out.includes(sendId) && r.out.includes(indexWorkflowId(corrupt.id)));
    expect(listed.code).toBe(0);
    expect(listed.out).not.toContain(indexWorkflowId(seen.file));
    expect(listed.out).not.toContain(messageSendWorkflowId(seen.message));
  }, 30_000);

  test('the "Finding and reading workflows" commands run as written against the dev server', async () => {
    const start = runbook.indexOf('**Finding and reading workflows.**');
    const block = runbook.slice(runbook.indexOf('```sh', start) + 5, runbook.indexOf('```', runbook.indexOf('```sh', start) + 5));
    const ids = { 'ws_…': ws, 'whk_…': seen.subscription, 'file_…': seen.file, 'conv_…': seen.conversation, 'msg_…': seen.message };
    const commands = block.split('\n').filter((l) => l.startsWith('temporal '));
    expect(commands.length).toBeGreaterThanOrEqual(10);
    // No schedules on the test server (they would pile up per task queue): `schedule trigger` is the one not run.
    for (const c of commands.filter((l) => !l.startsWith('temporal schedule trigger'))) {
      const r = await sh(asWritten(c, ids));
      expect({ command: c, code: r.code, out: r.code ? r.out : '' }).toEqual({ command: c, code: 0, out: '' });
    }
  }, 60_000);

  test("the runbook's cancel commands as written: one delivery, then a whole subscription with a reason", async () => {
    const text = runbook.replace(/\n\s*/g, ' ');
    const cancels = [...text.matchAll(/`(temporal workflow cancel [^`]+)`/g)].map((m) => m[1]);
    const ones = cancels.filter((c) => c.includes('dlv_…'));
    const all = cancels.find((c) => c.includes('whk_…'));
    // Plain, and with a reason (`--reason` is refused beside `-w`: it needs `--query`).
    expect(ones).toHaveLength(2);
    expect(all).toBeDefined();
    for (const one of ones) {
      const a = await deliveryWaiting();
      const r1 = await sh(asWritten(one, { 'dlv_…': a.deliveryId }));
      expect({ one, ...r1 }).toMatchObject({ one, code: 0 });
      await until('the cancelled delivery', () => delivery(a.subscriptionId, a.deliveryId), (d) => d.status === 'failed');
    }
    const b = await deliveryWaiting();
    const r2 = await sh(asWritten(all!, { 'whk_…': b.subscriptionId }));
    expect({ all, ...r2 }).toMatchObject({ all, code: 0 });
    await until('the cancelled subscription delivery', () => delivery(b.subscriptionId, b.deliveryId), (d) => d.status === 'failed');
  }, 40_000);
});
