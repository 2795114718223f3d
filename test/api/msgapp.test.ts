import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { newId } from '../../lib/ids';
import { CloudApiProvider, signHubPayload } from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { bearer, createKey, createWorkspace, startTestApp, testBlobs, type TestApp } from '../support/app';
import { upload } from '../support/kb';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { inboundDone, startInboundDispatcher } from '../support/msgapp';
import { startTestWorker, type TestWorker } from '../support/temporal';
import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';

/**
 * msgapp on one installation with two workspaces and one provider (the sandbox, which
 * knows which access token owns which number): a number belongs to one runnable agent and
 * nothing that arrives on it reaches anybody else; stored media is served so that it can
 * never run on the API's origin, by absolute links; messages read back as the contract
 * shows them.
 */
let db: TestDatabase;
let sandbox: MsgappSandbox;
let t: TestApp;
/** The worker (inbound messages are workflows) and its relay of what the webhook stores. */
let tw: TestWorker;
let relay: OutboxDispatcher;
let wsA: string;
let wsB: string;
let authA: Record<string, string>;
let authB: Record<string, string>;
let credA: string;
let credB: string;

const APP_SECRET = 'app-secret';
/** PUBLIC_BASE_URL: links name it; requests below go to the test server itself. */
const PUBLIC_BASE_URL = 'https://concierge.example';
const NUMBER_A = { id: '1110001', display: '+15550100001' };
const NUMBER_B = { id: '2220002', display: '+15550200002' };
/** Owned by workspace A's token, claimed by no agent. */
const SPARE_A = { id: '3330003', display: '+15550300003' };

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startMsgappSandbox({
    appSecret: APP_SECRET,
    numbers: [
      { phoneNumberId: NUMBER_A.id, displayPhoneNumber: NUMBER_A.display, accessToken: 'token-a' },
      { phoneNumberId: NUMBER_B.id, displayPhoneNumber: NUMBER_B.display, accessToken: 'token-b' },
      { phoneNumberId: SPARE_A.id, displayPhoneNumber: SPARE_A.display, accessToken: 'token-a' },
    ],
  });
  const serviceOptions = { msgapp: new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 }), publicBaseUrl: PUBLIC_BASE_URL };
  tw = await startTestWorker(db, serviceOptions);
  relay = await startInboundDispatcher(tw);
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions,
    msgappWebhook: { appSecret: APP_SECRET, verifyToken: 'verify-me' },
  });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  sandbox.setWebhookUrl(`http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/webhooks/msgapp`);
  const scopes = ['workflows:read', 'workflows:write', 'workflows:publish', 'conversations:read', 'kb:read', 'kb:write'] as const;
  wsA = await createWorkspace(db.orm);
  wsB = await createWorkspace(db.orm);
  authA = bearer((await createKey(t.services, wsA, [...scopes])).key);
  authB = bearer((await createKey(t.services, wsB, [...scopes])).key);
  credA = (await t.services.credentials.create(wsA, 'msgapp_access_token', 'A number', 'token-a')).id;
  credB = (await t.services.credentials.create(wsB, 'msgapp_access_token', 'B number', 'token-b')).id;
});
afterAll(async () => {
  // The API first (no request is left waiting on a worker that is gone), then the relay and the worker.
  await t.close();
  await relay.stop();
  await tw.close();
  await sandbox.close();
  await db.drop();
});

async function createAgent(auth: Record<string, string>, triggers: Record<string, unknown>): Promise<string> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Agent', instructions: 'Help.', triggers, actions: [{ type: 'sender' }] },
  });
  expect(res.statusCode).toBe(201);
  return res.json().id;
}
const publish = (auth: Record<string, string>, id: string) => t.app.inject({ method: 'POST', url: `/api/v1/agents/${id}/publish`, headers: auth });
const msgapp = (n: { id: string; display: string }, credential_id?: string) => ({ msgapp: { number: n.display, phone_number_id: n.id, ...(credential_id ? { credential_id } : {}) } });
const q = <T>(sql: string, params: unknown[] = []) => db.orm.em.fork().execute<T[]>(sql, params);

/** POSTs a provider notification signed as the provider signs it. */
async function notify(phoneNumberId: string, value: Record<string, unknown>) {
  const body = JSON.stringify({
    object: 'whatsapp_business_account',
    entry: [{ id: 'waba', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550000000', phone_number_id: phoneNumberId }, ...value } }] }],
  });
  const res = await t.app.inject({
    method: 'POST',
    url: '/webhooks/msgapp',
    headers: { 'content-type': 'application/json', 'x-hub-signature-256': signHubPayload(body, APP_SECRET) },
    payload: body,
  });
  expect(res.statusCode).toBe(200);
}

async function outbound(workspaceId: string, agentId: string, status = 'sent'): Promise<{ id: string; wamid: string }> {
  const id = newId('msg');
  const wamid = `wamid.${id}`;
  await q(
    `insert into messages (id, workspace_id, agent_id, direction, source, channel, from_number, to_number, kind, text, content, status, status_history, provider_message_id)
     values (?, ?, ?, 'outbound', 'api', 'msgapp', '+15550000000', '+15557770000', 'text', 'hi', '{}'::jsonb, ?, ?::jsonb, ?)`,
    [id, workspaceId, agentId, status, JSON.stringify(status === 'sending' ? [] : [{ status, at: '2026-01-01T00:00:00.000Z' }]), wamid],
  );
  return { id, wamid };
}

describe('msgapp number ownership across workspaces', () => {
  let agentA: string;
  let squatterB: string;
  let agentB: string;

  test('an agent published without a credential claims nothing, so the owner publishes after it', async () => {
    // Workspace B got there first, naming A's number without any credential (the old capture).
    squatterB = await createAgent(authB, msgapp(NUMBER_A));
    const squat = await publish(authB, squatterB);
    expect(squat.statusCode).toBe(200);
    expect(squat.json()).toMatchObject({ status: 'published', runnable: false });

    agentA = await createAgent(authA, msgapp(NUMBER_A, credA));
    const own = await publish(authA, agentA);
    expect(own.statusCode).toBe(200);
    expect(own.json()).toMatchObject({ status: 'published', runnable: true, invalid_reasons: [] });
  });

  test("workspace B publishing an agent naming A's number with its own credential: 409 number_in_use, nothing changes, A is not named", async () => {
    const id = await createAgent(authB, msgapp(NUMBER_A, credB));
    const res = await publish(authB, id);
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual({ error: 'number_in_use', message: expect.stringContaining(NUMBER_A.id) });
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/agents/${id}`, headers: authB })).json().status).toBe('draft');
  });

  test("a number the agent's token does not own at the provider: 422 number_not_owned with reasons", async () => {
    const id = await createAgent(authB, msgapp(SPARE_A, credB));
    const res = await publish(authB, id);
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({ error: 'number_not_owned', message: expect.any(String), reasons: [expect.stringContaining(`credential ${credB}`)] });
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/agents/${id}`, headers: authB })).json().status).toBe('draft');
  });

  test('a credential that does not exist in the workspace makes the agent not runnable (it claims nothing)', async () => {
    const id = await createAgent(authB, msgapp(SPARE_A, credA)); // A's credential id, used from B
    const res = await publish(authB, id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ runnable: false, invalid_reasons: [`credential ${credA} does not exist in this workspace`] });
  });

  test("editing a published agent onto A's number is checked too: 409, the agent keeps its spec", async () => {
    agentB = await createAgent(authB, msgapp(NUMBER_B, credB));
    expect((await publish(authB, agentB)).json().runnable).toBe(true);
    const patched = await t.app.inject({ method: 'PATCH', url: `/api/v1/agents/${agentB}`, headers: authB, payload: { triggers: msgapp(NUMBER_A, credB) } });
    expect(patched.statusCode).toBe(409);
    expect(patched.json().error).toBe('number_in_use');
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/agents/${agentB}`, headers: authB })).json().spec.triggers.msgapp.phone_number_id).toBe(NUMBER_B.id);
  });

  test('the database refuses a second claim of a number on its own (a unique index), and two concurrent publishes: one wins, one is 409', async () => {
    await expect(
      q(`insert into agents (id, workspace_id, name, status, spec) values (?, ?, 'x', 'published', ?::jsonb)`, [newId('agt'), wsB, JSON.stringify({ triggers: msgapp(NUMBER_A, credB) })]),
    ).rejects.toThrow(/agents_msgapp_claim_uq/);

    const one = await createAgent(authA, msgapp(SPARE_A, credA));
    const two = await createAgent(authA, msgapp(SPARE_A, credA));
    const results = await Promise.all([publish(authA, one), publish(authA, two)]);
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 409]);
    const winner = results.find((r) => r.statusCode === 200)!.json();
    expect(winner.runnable).toBe(true);
    expect(results.find((r) => r.statusCode === 409)!.json().error).toBe('number_in_use');
    // Later, in the same workspace, the holder is named.
    const third = await publish(authA, await createAgent(authA, msgapp(SPARE_A, credA)));
    expect(third.json()).toMatchObject({ error: 'number_in_use', agent_id: winner.id });
  });

  test("inbound messages on A's number reach workspace A only", async () => {
    const before = await q<{ workspace_id: string }>(`select workspace_id from webhook_events where type = 'message.inbound'`);
    const sent = await sandbox.injectInbound({ from: '+15557771234', to: NUMBER_A.id, text: 'hello A' });
    expect(sent.webhookStatus).toBe(200);
    expect(await inboundDone(tw, sent.providerMessageId)).toEqual({ status: 'recorded', messageId: expect.stringMatching(/^msg_/), answered: true });
    const rows = await q<{ workspace_id: string; agent_id: string }>(`select workspace_id, agent_id from messages where provider_message_id = ?`, [sent.providerMessageId]);
    expect(rows).toEqual([{ workspace_id: wsA, agent_id: agentA }]);
    const events = await q<{ workspace_id: string }>(`select workspace_id from webhook_events where type = 'message.inbound'`);
    expect(events.slice(before.length).map((e) => e.workspace_id)).toEqual([wsA]);
    expect(await q(`select 1 from customers where workspace_id = ?`, [wsB])).toEqual([]);
  });

  test('a signed notification holding a NUL character is 400 invalid_request naming the field, and records nothing', async () => {
    const body = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [{ id: 'waba', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550000000', phone_number_id: NUMBER_A.id },
        messages: [{ from: '15557770009', id: 'wamid.nul', timestamp: '1795500000', type: 'text', text: { body: 'bad \u0000 byte' } }] } }] }],
    });
    const res = await t.app.inject({ method: 'POST', url: '/webhooks/msgapp', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signHubPayload(body, APP_SECRET) }, payload: body });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_request', message: expect.stringContaining('text.body') });
    expect(await q(`select 1 from messages where provider_message_id = 'wamid.nul'`)).toEqual([]);
  });

  test("a status on A's number never touches B's message, even when it names B's ids; on B's own number it applies", async () => {
    const mB = await outbound(wsB, agentB);
    await notify(NUMBER_A.id, { statuses: [{ id: mB.wamid, status: 'read', timestamp: '1767225700', recipient_id: '15557770000', biz_opaque_callback_data: mB.id }] });
    const [untouched] = await q<{ status: string; status_history: unknown[] }>(`select status, status_history from messages where id = ?`, [mB.id]);
    expect(untouched.status).toBe('sent');
    expect(untouched.status_history).toHaveLength(1);

    await notify(NUMBER_B.id, { statuses: [{ id: mB.wamid, status: 'delivered', timestamp: '1767225700', recipient_id: '15557770000' }] });
    const [applied] = await q<{ status: string; status_history: unknown[] }>(`select status, status_history from messages where id = ?`, [mB.id]);
    expect(applied.status).toBe('delivered');
    expect(applied.status_history).toHaveLength(2);
  });

  test('a replayed identical status (same status and timestamp) is not appended again; a late one still is', async () => {
    const m = await outbound(wsA, agentA);
    const status = (s: string, ts: string) => ({ statuses: [{ id: m.wamid, status: s, timestamp: ts, recipient_id: '15557770000' }] });
    await notify(NUMBER_A.id, status('read', '1767225800'));
    await notify(NUMBER_A.id, status('read', '1767225800'));
    await notify(NUMBER_A.id, status('delivered', '1767225790'));
    const [row] = await q<{ status: string; status_history: Array<{ status: string; at: string }> }>(`select status, status_history from messages where id = ?`, [m.id]);
    expect(row.status).toBe('read');
    expect(row.status_history.map((e) => e.status)).toEqual(['sent', 'read', 'delivered']);
    const events = await q<{ payload: string }>(`select payload from webhook_events where type = 'message.status' and workspace_id = ?`, [wsA]);
    expect(events.map((e) => JSON.parse(e.payload).data).filter((d) => d.message_id === m.id)).toHaveLength(1);
  });
});

describe('stored bytes served back', () => {
  /** The inbound message's media element, from its message.inbound event. */
  async function inboundMedia(kind: 'image' | 'sticker' | 'document', mimeType: string, bytes: Buffer, filename?: string) {
    const sent = await sandbox.injectInbound({ from: '+15557779999', to: NUMBER_A.id, media: { kind, mimeType, bytes, filename } });
    expect(sent.webhookStatus).toBe(200);
    await inboundDone(tw, sent.providerMessageId);
    const [row] = await q<{ id: string }>(`select id from messages where provider_message_id = ?`, [sent.providerMessageId]);
    const events = await q<{ payload: string }>(`select payload from webhook_events where type = 'message.inbound' and workspace_id = ?`, [wsA]);
    const data = events.map((e) => JSON.parse(e.payload).data).find((d) => d.message_id === row.id);
    return data.media[0] as { url: string; mime_type: string; filename?: string };
  }
  const fetchLink = (url: string) => t.app.inject({ method: 'GET', url: new URL(url).pathname });
  const safetyHeaders = { 'x-content-type-options': 'nosniff', 'content-security-policy': 'sandbox' };

  test('message.inbound media links are absolute, on PUBLIC_BASE_URL', async () => {
    const media = await inboundMedia('document', 'application/pdf', Buffer.from('%PDF-1.4 x'), 'terms.pdf');
    expect(media.url).toMatch(/^https:\/\/concierge\.example\/api\/media\/[\w-]+\.[0-9a-f]+$/);
    const res = await fetchLink(media.url);
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject({ ...safetyHeaders, 'content-type': 'application/pdf', 'content-disposition': `attachment; filename="terms.pdf"; filename*=UTF-8''terms.pdf` });
  });

  test('an inbound "image" declared text/html and an SVG sticker are served as attachments of application/octet-stream, never rendered', async () => {
    const html = Buffer.from('<html><script>alert(document.domain)</script></html>');
    const page = await fetchLink((await inboundMedia('image', 'text/html', html)).url);
    expect(page.statusCode).toBe(200);
    expect(page.headers).toMatchObject({ ...safetyHeaders, 'content-type': 'application/octet-stream', 'content-disposition': expect.stringMatching(/^attachment; filename="download\.bin"/) });
    expect(page.rawPayload).toEqual(html);

    const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>');
    const sticker = await fetchLink((await inboundMedia('sticker', 'image/svg+xml', svg)).url);
    expect(sticker.headers).toMatchObject({ ...safetyHeaders, 'content-type': 'application/octet-stream', 'content-disposition': expect.stringMatching(/^attachment;/) });

    const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
    const image = await fetchLink((await inboundMedia('image', 'image/png', png)).url);
    expect(image.headers).toMatchObject({ ...safetyHeaders, 'content-type': 'image/png', 'content-disposition': expect.stringMatching(/^attachment; filename="download\.png"/) });
  });

  test('a media link whose bytes are gone is 410 media_gone in the error envelope', async () => {
    const bytes = Buffer.from('a file that will be removed');
    const media = await inboundMedia('document', 'text/plain', bytes, 'gone.txt');
    await testBlobs.delete(createHash('sha256').update(bytes).digest('hex'));
    const res = await fetchLink(media.url);
    expect(res.statusCode).toBe(410);
    expect(res.json()).toEqual({ error: 'media_gone', message: expect.any(String) });
  });

  test('knowledge-base downloads: an HTML file is an octet-stream attachment with the same headers; missing bytes are 410 content_gone', async () => {
    const html = '<!doctype html><html><body><script>fetch("/api/v1/kb/files")</script>Policies</body></html>';
    const created = await upload(t.app, authA, { filename: 'policies.html', content: html, type: 'text/html' });
    expect(created.statusCode).toBe(201);
    const id = created.json().id;
    const dl = await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${id}/download`, headers: authA });
    expect(dl.statusCode).toBe(200);
    expect(dl.headers).toMatchObject({ ...safetyHeaders, 'content-type': 'application/octet-stream', 'content-disposition': `attachment; filename="policies.bin"; filename*=UTF-8''policies.bin` });
    expect(dl.body).toBe(html);

    await testBlobs.delete(createHash('sha256').update(html).digest('hex'));
    const gone = await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${id}/download`, headers: authA });
    expect(gone.statusCode).toBe(410);
    expect(gone.json()).toEqual({ error: 'content_gone', message: expect.any(String) });
  });
});

describe('GET /api/v1/messages/{id}: the contract\'s message, nothing else', () => {
  const read = (id: string) => t.app.inject({ method: 'GET', url: `/api/v1/messages/${id}`, headers: authA });

  test('a delivered message reads back with exactly the contract\'s fields', async () => {
    const agent = (await q<{ id: string }>(`select id from agents where workspace_id = ? and status = 'published' limit 1`, [wsA]))[0].id;
    const m = await outbound(wsA, agent, 'delivered');
    const res = await read(m.id);
    expect(res.statusCode).toBe(200);
    expect(Object.keys(res.json()).sort()).toEqual(
      ['id', 'conversation_id', 'customer_id', 'agent_id', 'channel', 'from', 'to', 'kind', 'text', 'status', 'status_history', 'error', 'provider_message_id', 'created_at', 'updated_at'].sort(),
    );
    expect(res.json()).toMatchObject({ status: 'delivered', status_history: [{ status: 'delivered', at: '2026-01-01T00:00:00.000Z' }] });
  });

  test('a message the provider has not answered yet (sending) is not readable, nor listed; inbound messages are not readable here', async () => {
    const agent = (await q<{ id: string }>(`select id from agents where workspace_id = ? and status = 'published' limit 1`, [wsA]))[0].id;
    const sending = await outbound(wsA, agent, 'sending');
    expect((await read(sending.id)).statusCode).toBe(404);
    const list = (await t.app.inject({ method: 'GET', url: '/api/v1/messages?limit=200', headers: authA })).json();
    expect(list.messages.map((x: { id: string }) => x.id)).not.toContain(sending.id);
    expect(list.messages.every((x: { status: string }) => ['sent', 'delivered', 'read', 'failed'].includes(x.status))).toBe(true);

    const [inbound] = await q<{ id: string }>(`select id from messages where workspace_id = ? and direction = 'inbound' limit 1`, [wsA]);
    const res = await read(inbound.id);
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toBe('not_found');
  });
});
