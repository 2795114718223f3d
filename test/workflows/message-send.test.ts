import { WorkflowNotFoundError } from '@temporalio/client';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { testLogger } from '../support/secret-log';
import { verifyWebhook } from '../../lib/webhook-signature';
import { OutboxDispatcher } from '../../worker/outbox-dispatcher';
import { webhookDeliveries } from '../../worker/outbox-sources';
import { startHttpsReceiver } from '../../dev/fakes/tls';
import { CloudApiProvider, signHubPayload } from '../../providers/msgapp/cloud-api';
import { verifyWebhookHandshake } from '../../dev/fake-msgapp';
import { newId } from '../../lib/ids';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { OUTCOME, WORKSPACE_ID } from '../../worker/namespace-attributes';
import { OUTCOME_ATTRIBUTE_PATCH } from '../../workflows/outcome';
import { historySteps, maybeRecordHistory, startTestWorker } from '../support/temporal';
import { closeInOrder } from '../support/teardown';
import { LOCAL_DB_STEPS_PATCH } from '../../workflows/short-steps';
import { inboundDone, startInboundDispatcher } from '../support/msgapp';

let db: TestDatabase;
let sandbox: MsgappSandbox;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let relay: OutboxDispatcher;
let ws: string;
let auth: Record<string, string>;
let credentialId: string;
let base: string;

const NUMBER = '+15550001111';
const CUSTOMER = '+15557770000';
/** Where receivers reach the API (PUBLIC_BASE_URL); requests below go to the test server itself. */
const PUBLIC_BASE_URL = 'https://concierge.example';

beforeAll(async () => {
  db = await createTestDatabase();
  // The sandbox speaks the Cloud API over real HTTP on loopback, and checks the bearer token.
  sandbox = await startMsgappSandbox({ appSecret: 'app-secret', accessToken: 'sandbox-token', statusDelaysMs: { delivered: 20, read: 40 } });
  const msgapp = new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 });
  tw = await startTestWorker(db, { msgapp, publicBaseUrl: PUBLIC_BASE_URL });
  // Inbound messages the webhook stores become `msgapp-inbound:<wamid>` workflows through the worker's relay.
  relay = await startInboundDispatcher(tw);
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions: { msgapp, publicBaseUrl: PUBLIC_BASE_URL },
    // In one process with the worker, on its native connection (as `npm start`): sends start eagerly.
    temporal: { client: tw.client, taskQueue: tw.taskQueue, eagerStart: true },
    msgappWebhook: { appSecret: 'app-secret', verifyToken: 'verify-me' },
  });
  // The sandbox calls our webhook over real HTTP.
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  sandbox.setWebhookUrl(`${base}/webhooks/msgapp`);
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['conversations:read', 'conversations:write', 'workflows:write', 'workflows:publish'])).key);
  credentialId = (await t.services.credentials.create(ws, 'msgapp_access_token', 'sandbox number', 'sandbox-token')).id;
});
afterAll(async () => {
  await closeInOrder([
    // The API first: no request is left waiting on a worker that is gone.
    ['app', () => t.close()],
    ['relay', () => relay.stop()],
    ['worker', () => tw.close()],
    ['sandbox', () => sandbox.close()],
    ['database', () => db.drop()],
  ]);
}, 120_000);

async function agent(spec: Record<string, unknown>, publish = true): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: {
      name: 'Sender',
      instructions: 'Help.',
      triggers: { msgapp: { number: NUMBER, phone_number_id: '1055', credential_id: credentialId } },
      actions: [{ type: 'sender' }],
      templates: [
        { name: 'order_update', language: 'en', body: 'Order {{1}} shipped.', status: 'approved' },
        { name: 'promo', language: 'en', body: 'Sale!', status: 'pending' },
      ],
      ...spec,
    },
  });
  expect(res.statusCode).toBe(201);
  const id = res.json().id;
  if (publish) await t.app.inject({ method: 'POST', url: `/api/v1/agents/${id}/publish`, headers: auth });
  return id;
}

const send = (payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/api/v1/messages', headers: auth, payload });
const messageCount = async () => Number((await db.orm.em.fork().execute<{ n: string }[]>('select count(*) as n from messages'))[0].n);
const template = { template: { name: 'order_update', variables: ['A-1'] } };

describe('POST /api/v1/messages', () => {
  let main: string;
  beforeAll(async () => {
    main = await agent({});
  });

  test('a template outside the window: 201 sent once the provider accepted; recorded, billed, event emitted', async () => {
    const before = sandbox.sent.length;
    const res = await send({ from: NUMBER, to: CUSTOMER, ...template });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      id: expect.stringMatching(/^msg_/),
      conversation_id: expect.stringMatching(/^conv_/),
      agent_id: main,
      channel: 'msgapp',
      to: CUSTOMER,
      from: NUMBER,
      send_authorized: true,
      status: 'sent',
      provider_message_id: expect.stringMatching(/^wamid\./),
    });
    expect(sandbox.sent.length).toBe(before + 1);
    const sent = sandbox.sent.at(-1)!;
    expect(sent.body).toMatchObject({ messaging_product: 'whatsapp', to: CUSTOMER, type: 'template', template: { name: 'order_update' } });
    await maybeRecordHistory(tw.client, `message-send:${body.id}`, 'message-send-outcome');
    // Started eagerly (the first workflow task came back with the start call); the database steps ran as local
    // activities, in the worker, behind the patch; only the provider call went through the task queue. The outcome
    // attribute is upserted behind its own patch.
    expect(await historySteps(tw.client, `message-send:${body.id}`)).toEqual({
      eager: true,
      activities: ['callMsgappProvider'],
      localActivities: ['recordMessage', 'markMessageSent'],
      patches: [LOCAL_DB_STEPS_PATCH, OUTCOME_ATTRIBUTE_PATCH],
    });
    // An operator filtering by workspace finds the send.
    const described = await tw.client.workflow.getHandle(`message-send:${body.id}`).describe();
    expect(described.typedSearchAttributes.get(WORKSPACE_ID)).toBe(ws);
    expect(described.typedSearchAttributes.get(OUTCOME)).toBe('succeeded');

    const read = (await t.app.inject({ method: 'GET', url: `/api/v1/messages/${body.id}`, headers: auth })).json();
    // The sandbox's status callbacks may already have moved it on.
    expect(read).toMatchObject({ id: body.id, kind: 'template', template_name: 'order_update', provider_message_id: body.provider_message_id, status_history: expect.arrayContaining([expect.objectContaining({ status: 'sent' })]) });
    expect(['sent', 'delivered', 'read']).toContain(read.status);
    const em = db.orm.em.fork();
    expect(await em.execute('select kind from usage_records where message_id = ?', [body.id])).toEqual([{ kind: 'msgapp_message' }]);
    const events = await em.execute<{ payload: string }[]>(`select payload from webhook_events where type = 'message.status' order by created_at, id`);
    const sentEvents = events.map((e) => JSON.parse(e.payload).data).filter((d) => d.message_id === body.id && d.status === 'sent');
    expect(sentEvents).toEqual([{ message_id: body.id, status: 'sent', conversation_id: body.conversation_id, channel: 'msgapp', occurred_at: expect.any(String) }]);
  });

  test('text needs the 24-hour window: closed → 422 session_window_closed; after the customer wrote → 201', async () => {
    const closed = await send({ from: NUMBER, to: '+15557770001', text: 'hello' });
    expect(closed.statusCode).toBe(422);
    expect(closed.json().error).toBe('session_window_closed');
    await db.orm.em.fork().execute(
      `insert into messages (id, workspace_id, direction, source, channel, from_number, to_number, kind, text, content, status)
       values (?, ?, 'inbound', 'customer', 'msgapp', ?, ?, 'text', 'hi', '{}'::jsonb, 'received')`,
      [newId('msg'), ws, '+15557770001', NUMBER],
    );
    const open = await send({ from: NUMBER, to: '+15557770001', text: 'hello' });
    expect(open.statusCode).toBe(201);
    expect(sandbox.sent.at(-1)!.body).toMatchObject({ type: 'text', text: { body: 'hello' } });
  });

  test.each([
    [{ to: CUSTOMER, text: 'a', location: { latitude: 1, longitude: 2 } }, /exactly one/],
    [{ to: CUSTOMER }, /exactly one/],
    [{ from: NUMBER, to: CUSTOMER, channel: 'sms', ...template }, /^channel/],
    [{ from: NUMBER, agent_id: 'agt_x', to: CUSTOMER, ...template }, /not both/],
    [{ to: CUSTOMER, ...template }, /^from/],
    [{ from: NUMBER, to: CUSTOMER, media: { type: 'audio', url: 'https://cdn.example/a.ogg', caption: 'x' } }, /media\.caption/],
    [{ from: NUMBER, to: CUSTOMER, media: { type: 'image', url: 'https://cdn.example/a.png', filename: 'a.png' } }, /media\.filename/],
    [{ from: NUMBER, to: '12345', ...template }, /body\.to/],
  ])('400 invalid_request naming the field: %j', async (payload, message) => {
    const before = await messageCount();
    const res = await send(payload);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(message) });
    expect(await messageCount()).toBe(before);
  });

  test('a template that is not approved is 422 template_not_approved', async () => {
    const res = await send({ from: NUMBER, to: CUSTOMER, template: { name: 'promo' } });
    expect(res.statusCode).toBe(422);
    expect(res.json().error).toBe('template_not_approved');
  });

  test('no agent claims the number → 404 naming it', async () => {
    const res = await send({ from: '+15559999999', to: CUSTOMER, ...template });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: 'not_found', message: expect.stringContaining('+15559999999') });
  });

  test('sender rules: draft, no sender action, cannot run, ambiguous — each refused before anything is recorded', async () => {
    const other = '+15550002222';
    const draft = await agent({ triggers: { msgapp: { number: other, phone_number_id: '2', credential_id: credentialId } } }, false);
    const before = await messageCount();
    const d = await send({ from: other, to: CUSTOMER, ...template });
    expect(d.statusCode).toBe(422);
    expect(d.json()).toMatchObject({ error: 'agent_not_published', agent_id: draft });

    const third = '+15550003333';
    await agent({ actions: [], triggers: { msgapp: { number: third, phone_number_id: '3', credential_id: credentialId } } });
    expect((await send({ from: third, to: CUSTOMER, ...template })).json().error).toBe('sender_not_authorized');

    const fourth = '+15550004444';
    const broken = await agent({ instructions: '', triggers: { msgapp: { number: fourth, phone_number_id: '4', credential_id: credentialId } } });
    const invalid = await send({ from: fourth, to: CUSTOMER, ...template });
    expect(invalid.statusCode).toBe(422);
    expect(invalid.json()).toMatchObject({ error: 'sender_agent_invalid', agent_id: broken, reasons: ['instructions are empty'] });

    // The same display number on another phone_number_id (a phone_number_id itself is claimed by one agent only).
    const twin = await agent({ triggers: { msgapp: { number: NUMBER, phone_number_id: '1056', credential_id: credentialId } } });
    const ambiguous = await send({ from: NUMBER, to: CUSTOMER, ...template });
    expect(ambiguous.statusCode).toBe(422);
    expect(ambiguous.json()).toMatchObject({ error: 'ambiguous_sender' });
    expect(ambiguous.json().agent_ids.sort()).toEqual([main, twin].sort());
    expect(await messageCount()).toBe(before);

    // agent_id chooses between them.
    const chosen = await send({ agent_id: twin, to: CUSTOMER, ...template });
    expect(chosen.statusCode).toBe(201);
    expect(chosen.json().agent_id).toBe(twin);
  });

  test('the provider refuses: 502 provider_error, and the message reads back as failed with the reason', async () => {
    sandbox.failNext({ kind: 'send', status: 400, code: 131030, message: 'Recipient phone number not in allowed list' });
    const res = await send({ agent_id: main, to: '+15557770002', ...template });
    expect(res.statusCode).toBe(502);
    expect(res.json()).toMatchObject({ error: 'provider_error', message_id: expect.stringMatching(/^msg_/) });
    const read = (await t.app.inject({ method: 'GET', url: `/api/v1/messages/${res.json().message_id}`, headers: auth })).json();
    expect(read).toMatchObject({ status: 'failed', error: expect.stringContaining('allowed list'), status_history: [{ status: 'failed' }] });
  });

  test('list: API-sent only, filters, cursor', async () => {
    const all = (await t.app.inject({ method: 'GET', url: '/api/v1/messages?limit=200', headers: auth })).json();
    expect(all.messages.length).toBeGreaterThanOrEqual(3);
    expect(all.messages.every((m: { from: string }) => m.from === NUMBER)).toBe(true);
    const failed = (await t.app.inject({ method: 'GET', url: '/api/v1/messages?status=failed', headers: auth })).json();
    expect(failed.messages.map((m: { status: string }) => m.status)).toEqual(['failed']);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { messages: { id: string }[]; next_cursor: string | null } = (
        await t.app.inject({ method: 'GET', url: `/api/v1/messages?limit=1${cursor ? `&cursor=${cursor}` : ''}`, headers: auth })
      ).json();
      seen.push(...page.messages.map((m) => m.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual(all.messages.map((m: { id: string }) => m.id));
    const future = (await t.app.inject({ method: 'GET', url: `/api/v1/messages?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`, headers: auth })).json();
    expect(future.messages).toEqual([]);
  });
});

describe('the provider webhook /webhooks/msgapp', () => {
  const messageRow = async (id: string) =>
    (await db.orm.em.fork().execute<{ status: string; error: string | null; status_history: Array<{ status: string }> }[]>('select status, error, status_history from messages where id = ?', [id]))[0];
  const statusEvents = async (id: string) =>
    (await db.orm.em.fork().execute<{ payload: string }[]>(`select payload from webhook_events where type = 'message.status' order by created_at, id`))
      .map((r) => JSON.parse(r.payload).data)
      .filter((d: { message_id: string }) => d.message_id === id)
      .map((d: { status: string }) => d.status);
  async function settledTo(id: string, status: string) {
    for (let i = 0; i < 100 && (await messageRow(id)).status !== status; i++) await new Promise((r) => setTimeout(r, 50));
    await sandbox.idle();
    return messageRow(id);
  }
  let agentId: string;
  beforeAll(async () => {
    agentId = await agent({ triggers: { msgapp: { number: '+15550005555', phone_number_id: '5055', credential_id: credentialId } } });
  });

  test('the verification handshake echoes the challenge only for the right token', async () => {
    expect(await verifyWebhookHandshake(`${base}/webhooks/msgapp`, 'verify-me')).toMatchObject({ ok: true });
    expect(await verifyWebhookHandshake(`${base}/webhooks/msgapp`, 'wrong')).toMatchObject({ ok: false, status: 403 });
  });

  test('a bad signature is 401 and nothing is recorded', async () => {
    const body = JSON.stringify({ object: 'whatsapp_business_account', entry: [] });
    const before = await messageCount();
    for (const sig of [undefined, 'sha256=00', signHubPayload(body, 'another-secret')]) {
      const res = await fetch(`${base}/webhooks/msgapp`, { method: 'POST', headers: { 'content-type': 'application/json', ...(sig ? { 'x-hub-signature-256': sig } : {}) }, body });
      expect(res.status).toBe(401);
    }
    expect(await messageCount()).toBe(before);
  });

  test('statuses move forward: sent → delivered → read, each change a message.status event', async () => {
    const sent = (await send({ agent_id: agentId, to: CUSTOMER, ...template })).json();
    const row = await settledTo(sent.id, 'read');
    expect(row.status).toBe('read');
    expect(new Set(row.status_history.map((h) => h.status))).toEqual(new Set(['sent', 'delivered', 'read']));
    expect(await statusEvents(sent.id)).toEqual(['sent', 'delivered', 'read']);
  });

  test('out-of-order and duplicate callbacks are kept in the history but never move status backwards or emit twice', async () => {
    sandbox.scenario({ outOfOrder: true, duplicates: true });
    try {
      const sent = (await send({ agent_id: agentId, to: CUSTOMER, ...template })).json();
      const row = await settledTo(sent.id, 'read');
      await sandbox.idle();
      const final = await messageRow(sent.id);
      expect(final.status).toBe('read');
      expect(final.status_history.length).toBeGreaterThan(row.status_history.length - 1);
      const events = await statusEvents(sent.id);
      expect(new Set(events).size).toBe(events.length);
      expect(events[0]).toBe('sent');
      expect(events).toContain('read');
    } finally {
      sandbox.scenario({});
    }
  });

  test('a media message that reports sent and then fails: status failed with the provider error, and an event', async () => {
    const customer = '+15557770404';
    await inboundDone(tw, (await sandbox.injectInbound({ from: customer, to: '5055', text: 'send me the photo' })).providerMessageId);
    sandbox.failNext({ kind: 'delivery', error: 'Media download failed at the recipient' });
    const res = await send({ agent_id: agentId, to: customer, media: { type: 'image', url: 'https://cdn.example/photo.jpg', caption: 'Here it is' } });
    expect(res.statusCode).toBe(201);
    const sent = res.json();
    expect(sandbox.sent.at(-1)!.body).toMatchObject({ type: 'image', image: { link: 'https://cdn.example/photo.jpg', caption: 'Here it is' } });
    expect(sent.status).toBe('sent');
    const row = await settledTo(sent.id, 'failed');
    expect(row).toMatchObject({ status: 'failed', error: expect.stringContaining('Media download failed') });
    expect(await statusEvents(sent.id)).toEqual(['sent', 'failed']);
    const read = (await t.app.inject({ method: 'GET', url: `/api/v1/messages/${sent.id}`, headers: auth })).json();
    expect(read.status_history.at(-1)).toMatchObject({ status: 'failed', error: expect.any(String) });
  });

  test('inbound text: customer and conversation found or created, message.inbound emitted (and delivered to a subscriber), and the window opens', async () => {
    const from = '+15557771234';
    const receiver = await startHttpsReceiver({ handler: (_req, res) => res.writeHead(204).end() });
    const dispatcher = new OutboxDispatcher(tw.composition.notifications!, [webhookDeliveries(t.services.deliveries, tw.client, { taskQueue: tw.taskQueue, backoffMs: [50, 50, 50, 50, 50], timeoutMs: 2_000 })], testLogger(), 500);
    await dispatcher.start();
    const hooks = bearer((await createKey(t.services, ws, ['webhooks:write'])).key);
    const sub = await t.app.inject({ method: 'POST', url: '/api/v1/webhook-subscriptions', headers: hooks, payload: { url: receiver.url, events: ['message.inbound'] } });
    expect(sub.statusCode).toBe(201);
    const closed = await send({ agent_id: agentId, to: from, text: 'hi' });
    expect(closed.json().error).toBe('session_window_closed');
    const { providerMessageId, webhookStatus } = await sandbox.injectInbound({ from, to: '5055', text: 'Where is my order?', profileName: 'Rita' });
    expect(webhookStatus).toBe(200);
    // Recorded by the webhook's own transaction: the message and its message.inbound were committed before the provider had its 200.
    const [atAck] = await db.orm.em
      .fork()
      .execute<{ id: string; events: string }[]>(
        `select m.id, (select count(*) from webhook_events e where e.type = 'message.inbound' and e.payload::jsonb #>> '{data,message_id}' = m.id) as events from messages m where m.provider_message_id = ?`,
        [providerMessageId],
      );
    expect(atAck).toEqual({ id: expect.stringMatching(/^msg_/), events: '1' });
    const done = await inboundDone(tw, providerMessageId);
    // The agent (a sender) answers it: handed to the conversation's actor by the relay, with no workflow of its own.
    expect(done).toEqual({ status: 'recorded', messageId: atAck.id, answered: true });
    const none = await tw.client.workflow.getHandle(`msgapp-inbound:${providerMessageId}`).describe().then(() => null, (err: Error) => err);
    expect(none instanceof WorkflowNotFoundError || /not found/i.test(String(none?.message))).toBe(true);
    const [event] = await db.orm.em
      .fork()
      .execute<{ payload: string }[]>(`select payload from webhook_events where type = 'message.inbound' order by created_at desc limit 1`);
    const data = JSON.parse(event.payload).data;
    expect(data).toEqual({ message_id: expect.stringMatching(/^msg_/), channel: 'msgapp', from, to: '+15550005555', text: 'Where is my order?', profile_name: 'Rita', received_at: expect.any(String) });
    expect((await db.orm.em.fork().execute('select 1 from messages where provider_message_id = ?', [providerMessageId])).length).toBe(1);
    const customers = (await t.app.inject({ method: 'GET', url: '/api/v1/customers?phone=%2B15557771234', headers: bearer((await createKey(t.services, ws, ['customers:read'])).key) })).json();
    expect(customers.customers).toEqual([expect.objectContaining({ phone: from, name: 'Rita' })]);
    // The subscriber receives it, signed, with the same message_id.
    for (let i = 0; i < 100 && receiver.hits.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    await dispatcher.stop();
    await t.app.inject({ method: 'DELETE', url: `/api/v1/webhook-subscriptions/${sub.json().id}`, headers: hooks });
    await receiver.close();
    expect(receiver.hits).toHaveLength(1);
    expect(verifyWebhook(receiver.hits[0].rawBody, String(receiver.hits[0].headers['x-concierge-signature']), sub.json().secret)).toMatchObject({ event: 'message.inbound', data: { message_id: data.message_id } });
    const answer = await send({ agent_id: agentId, to: from, text: 'It left today.' });
    expect(answer.statusCode).toBe(201);
    // Inbound messages are not API-sent: the list leaves them out.
    const list = (await t.app.inject({ method: 'GET', url: `/api/v1/messages?from=${encodeURIComponent(from)}`, headers: auth })).json();
    expect(list.messages).toEqual([]);
  });

  /** A signed notification of one inbound message on the agent's number, as the provider posts it. */
  const postInbound = (message: Record<string, unknown>) => {
    const body = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [{ id: 'waba', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550005555', phone_number_id: '5055' }, messages: [message] } }] }],
    });
    return fetch(`${base}/webhooks/msgapp`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signHubPayload(body, 'app-secret') }, body });
  };
  const inboundEvents = async (messageId: string) =>
    (await db.orm.em.fork().execute<{ payload: string }[]>(`select payload from webhook_events where type = 'message.inbound'`))
      .map((r) => JSON.parse(r.payload).data)
      .filter((d: { message_id: string }) => d.message_id === messageId);

  test('the provider repeating an inbound callback: stored once, one workflow, one message and one message.inbound', async () => {
    const wamid = `wamid.${newId('msg')}`;
    const message = { from: '15557770606', id: wamid, timestamp: '1767225600', type: 'text', text: { body: 'are you open on Sunday?' } };
    const answers = await Promise.all([postInbound(message), postInbound(message)]);
    expect(answers.map((r) => r.status)).toEqual([200, 200]);
    const done = await inboundDone(tw, wamid);
    expect(done).toEqual({ status: 'recorded', messageId: expect.stringMatching(/^msg_/), answered: true });
    expect((await postInbound(message)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 700));
    const em = db.orm.em.fork();
    expect(await em.execute('select id from messages where provider_message_id = ?', [wamid])).toEqual([{ id: (done as { messageId: string }).messageId }]);
    expect(await em.execute('select count(*)::int as n from msgapp_inbound_events where provider_message_id = ?', [wamid])).toEqual([{ n: 1 }]);
    expect(await inboundEvents((done as { messageId: string }).messageId)).toHaveLength(1);
  });

  test('media the provider will not hand over: the message is still recorded, with media_error, and message.inbound says so', async () => {
    const wamid = `wamid.${newId('msg')}`;
    expect((await postInbound({ from: '15557770607', id: wamid, timestamp: '1767225600', type: 'image', image: { id: 'no-such-media', mime_type: 'image/png' } })).status).toBe(200);
    const done = await inboundDone(tw, wamid);
    expect(done).toMatchObject({ status: 'recorded' });
    const [event] = await inboundEvents((done as { messageId: string }).messageId);
    expect(event.media).toBeUndefined();
    expect(event.media_error).toMatch(/^the attachment could not be downloaded: /);
  });

  test('inbound media is downloaded to storage and linked by a signed, expiring URL', async () => {
    const bytes = Buffer.from('%PDF-1.4 fake invoice bytes');
    await inboundDone(tw, (await sandbox.injectInbound({ from: '+15557775678', to: '5055', media: { kind: 'document', mimeType: 'application/pdf', bytes, filename: 'invoice.pdf' } })).providerMessageId);
    const [event] = await db.orm.em
      .fork()
      .execute<{ payload: string }[]>(`select payload from webhook_events where type = 'message.inbound' order by created_at desc limit 1`);
    const media = JSON.parse(event.payload).data.media;
    // Absolute, on PUBLIC_BASE_URL: a webhook receiver cannot resolve a bare path.
    expect(media).toEqual([
      { type: 'document', mime_type: 'application/pdf', url: expect.stringMatching(/^https:\/\/concierge\.example\/api\/media\//), filename: 'invoice.pdf', size: bytes.length, received_at: expect.any(String), sha256: createHash('sha256').update(bytes).digest('hex') },
    ]);
    const path = new URL(media[0].url).pathname;
    const got = await fetch(`${base}${path}`);
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe('application/pdf');
    expect(got.headers.get('content-disposition')).toBe(`attachment; filename="invoice.pdf"; filename*=UTF-8''invoice.pdf`);
    expect(Buffer.from(await got.arrayBuffer())).toEqual(bytes);
    const tampered = await fetch(`${base}${path.slice(0, -2)}00`);
    expect(tampered.status).toBe(403);
  });
});
