import { CloudApiProvider } from '../../core/msgapp/provider';
import { newId } from '../../core/ids';
import { startMsgappSandbox, type MsgappSandbox } from '../../sandbox/msgapp';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { createServices } from '../../core/services';
import { bearer, createKey, createWorkspace, startTestApp, testServiceOptions, type TestApp } from '../support/app';
import { maybeRecordHistory, startTestWorker } from '../support/temporal';

let db: TestDatabase;
let sandbox: MsgappSandbox;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let ws: string;
let auth: Record<string, string>;
let credentialId: string;

const NUMBER = '+15550001111';
const CUSTOMER = '+15557770000';

beforeAll(async () => {
  db = await createTestDatabase();
  // The sandbox speaks the Cloud API over real HTTP on loopback, and checks the bearer token.
  sandbox = await startMsgappSandbox({ appSecret: 'app-secret', accessToken: 'sandbox-token', statusDelaysMs: { delivered: 20, read: 40 } });
  const msgapp = new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 });
  tw = await startTestWorker({ em: db.orm.em, services: createServices(db.orm.em, testServiceOptions({ msgapp })) });
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions: { msgapp },
    temporal: { client: tw.client, taskQueue: tw.taskQueue },
  });
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['conversations:read', 'conversations:write', 'workflows:write', 'workflows:publish'])).key);
  credentialId = (await t.services.credentials.create(ws, 'msgapp_access_token', 'sandbox number', 'sandbox-token')).id;
});
afterAll(async () => {
  await tw.close();
  await t.close();
  await sandbox.close();
  await db.drop();
});

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
    await maybeRecordHistory(tw.client, `message-send:${body.id}`, 'message-send');

    const read = (await t.app.inject({ method: 'GET', url: `/api/v1/messages/${body.id}`, headers: auth })).json();
    expect(read).toMatchObject({ id: body.id, kind: 'template', template_name: 'order_update', status: 'sent', provider_message_id: body.provider_message_id, status_history: [{ status: 'sent' }] });
    const em = db.orm.em.fork();
    expect(await em.execute('select kind from usage_records where message_id = ?', [body.id])).toEqual([{ kind: 'msgapp_message' }]);
    const [event] = await em.execute<{ payload: string }[]>(`select payload from webhook_events where type = 'message.status' order by created_at desc limit 1`);
    expect(JSON.parse(event.payload).data).toMatchObject({ message_id: body.id, status: 'sent', conversation_id: body.conversation_id, channel: 'msgapp' });
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

    const twin = await agent({});
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
