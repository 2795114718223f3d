import type { AddressInfo } from 'node:net';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, type TestApp } from '../support/app';
import { asBrowser, CONSOLE_ORIGIN, handoffReply, signedInUser, type Browser } from '../support/console';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { frameCollector } from '../support/socket';
import { multipart } from '../support/kb';
import { startTestWorker } from '../support/temporal';
import { CloudApiProvider } from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { closeWindow, inboundDone, publishedMsgappAgent, startInboundDispatcher } from '../support/msgapp';
import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';

/**
 * The inbox's reply with a file from the person's computer (issue 31, "attaches files"), on the real app, a real
 * database and Temporal: POST /api/console/inbox/conversations/{id}/attachments stores it as the widget's uploads are,
 * the reply (through the conversation's workflow) names it, and the visitor gets it with a signed link.
 */
let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let port: number;
let site: { site_id: string; site_secret: string };
let agentA: Browser;
let viewerA: Browser;
let agentB: Browser;
let sandbox: MsgappSandbox;
let relay: OutboxDispatcher;
let wsA: string;
let auth: Record<string, string>;
const ORIGIN = 'https://shop.example';
const NUMBER = { id: '4440031', display: '+15550400031' };
const APP_SECRET = 'app-secret';

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply: handoffReply, chunkChars: 50 });
  sandbox = await startMsgappSandbox({ appSecret: APP_SECRET, numbers: [{ phoneNumberId: NUMBER.id, displayPhoneNumber: NUMBER.display, accessToken: 'token-1' }] });
  const msgapp = new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 });
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' }, msgapp });
  relay = await startInboundDispatcher(tw);
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    temporal: { client: tw.client, taskQueue: tw.taskQueue },
    config: { PUBLIC_BASE_URL: CONSOLE_ORIGIN },
    serviceOptions: { publicBaseUrl: CONSOLE_ORIGIN, msgapp },
    msgappWebhook: { appSecret: APP_SECRET, verifyToken: 'verify-me' },
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
  sandbox.setWebhookUrl(`http://127.0.0.1:${port}/webhooks/msgapp`);
  wsA = await createWorkspace(db.orm, 'Workspace A');
  const wsB = await createWorkspace(db.orm, 'Workspace B');
  [agentA, viewerA, agentB] = await Promise.all([
    signedInUser(t.app, t.services, wsA, 'agent', 'alex@example.com'),
    signedInUser(t.app, t.services, wsA, 'viewer'),
    signedInUser(t.app, t.services, wsB, 'agent'),
  ]);
  auth = bearer((await createKey(t.services, wsA, ['workflows:write', 'workflows:publish'])).key);
  const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { actions: [{ type: 'handoff', message: 'A colleague will take it from here.' }] });
  site = await t.services.sites.create(wsA, agentId, [ORIGIN]);
}, 60_000);

afterAll(async () => {
  await t?.close();
  await relay?.stop();
  await tw?.close();
  await llm?.close();
  await sandbox?.close();
  await db?.drop();
});

const widget = (method: 'GET' | 'POST', url: string, payload?: object) =>
  t.app.inject({ method, url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': site.site_id, origin: ORIGIN }, payload });
const act = (b: Browser, id: string, action: object) => t.app.inject({ method: 'POST', url: `/api/console/inbox/conversations/${id}/actions`, headers: asBrowser(b), payload: action });
const attach = (b: Browser, conv: string, filename: string, content: string | Buffer) => {
  const body = multipart([{ name: 'file', value: content, filename }]);
  return t.app.inject({ method: 'POST', url: `/api/console/inbox/conversations/${conv}/attachments`, headers: { ...asBrowser(b), ...body.headers }, payload: body.payload });
};
async function until(check: () => Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
const get = (url: string) => new URL(url).pathname + new URL(url).search;
/** A visitor who asked for a person: the agent's handoff tool flags the conversation. */
async function handedOff(): Promise<string> {
  const id = ((await widget('POST', 'init', {})).json() as { conversation_id: string }).conversation_id;
  expect((await widget('POST', 'send', { conversation_id: id, text: 'I want a person' })).json().text).toBe('A colleague will take it from here.');
  return id;
}

describe('a reply with a file from the person\'s computer', () => {
  test('uploaded to the conversation, sent with a web chat reply, its signed link gives the same bytes; HTML is only ever a download; viewer 403, other workspace 404', async () => {
    const id = await handedOff();
    const bytes = 'Order A-1: shipped on Monday.\n';
    expect((await attach(viewerA, id, 'order.txt', bytes)).statusCode).toBe(403);
    expect((await attach(agentB, id, 'order.txt', bytes)).json()).toMatchObject({ error: 'not_found' });
    expect((await attach(agentA, id, 'empty.txt', '')).json()).toMatchObject({ error: 'invalid_request' });
    expect((await attach(agentA, id, 'tool.exe', Buffer.from([0x4d, 0x5a, 0x90, 0x00, 0x03, 0x00, 0x00, 0x00]))).json()).toMatchObject({ error: 'unsupported_type' });
    const up = await attach(agentA, id, 'order.txt', bytes);
    expect(up.statusCode).toBe(201);
    expect(up.json()).toMatchObject({ upload_id: expect.stringMatching(/^upl_/), file_name: 'order.txt', mime_type: 'text/plain', status: 'ready' });
    const socket = await frameCollector(`ws://127.0.0.1:${port}/api/chat/connect?site_id=${site.site_id}&conversation_id=${id}`, ORIGIN);
    // Not another conversation's file.
    const other = await handedOff();
    expect((await act(agentA, other, { kind: 'reply', text: 'Here', attachments: [up.json().upload_id] })).json().error).toBe('not_found');
    const replied = await act(agentA, id, { kind: 'reply', text: 'Here is your order', attachments: [up.json().upload_id] });
    expect(replied.statusCode).toBe(200);
    await socket.until((f) => f.some((x) => x.type === 'reply' && x.text === 'Here is your order'));
    expect(socket.frames.find((x) => x.text === 'Here is your order')).toMatchObject({ attachments: [expect.objectContaining({ upload_id: up.json().upload_id, file_name: 'order.txt', url: expect.any(String) })] });
    socket.close();
    const history = (await widget('GET', `history?conversation_id=${id}`)).json();
    const shown = history.messages.at(-1);
    expect(shown).toMatchObject({ text: 'Here is your order', author: 'human', attachments: [expect.objectContaining({ file_name: 'order.txt', url: expect.any(String) })] });
    const download = await t.app.inject({ method: 'GET', url: get(shown.attachments[0].url) });
    expect(download.statusCode).toBe(200);
    expect(download.body).toBe(bytes);
    expect(download.headers['content-disposition']).toMatch(/^attachment/);
    // HTML: stored, but served as a download that browsers do not run.
    const page = await attach(agentA, id, 'page.html', '<!doctype html><html><body><script>alert(1)</script></body></html>');
    expect(page.statusCode).toBe(201);
    const served = await t.app.inject({ method: 'GET', url: get(page.json().file_url) });
    expect(served.headers['content-disposition']).toMatch(/^attachment/);
    expect(served.headers['content-type']).not.toMatch(/html/);
    expect(served.headers['x-content-type-options']).toBe('nosniff');
  }, 40_000);

  test('msgapp: in the 24-hour window the file goes as a media message (its link gives the same bytes, the text its caption) and the history shows it; outside the window it is refused as a text is', async () => {
    await publishedMsgappAgent(t, auth, wsA, NUMBER);
    const customer = '+15557003101';
    const inbound = await sandbox.injectInbound({ from: customer, to: NUMBER.id, text: 'I want a person', profileName: 'Robin' });
    expect(inbound.webhookStatus).toBe(200);
    const done = await inboundDone(tw, inbound.providerMessageId);
    if (done.status !== 'recorded') throw new Error(`inbound ${done.status}`);
    const [{ conversation_id: id }] = await db.orm.em.fork().execute<Array<{ conversation_id: string }>>('select conversation_id from messages where id = ?', [done.messageId]);
    const bytes = 'Invoice A-1: 42.00 EUR\n';
    const up = await attach(agentA, id, 'invoice.txt', bytes);
    expect(up.statusCode).toBe(201);
    expect(up.json()).toMatchObject({ upload_id: expect.stringMatching(/^upl_/), file_name: 'invoice.txt', mime_type: 'text/plain', status: 'ready' });
    // One file per msgapp reply; a template carries none.
    expect((await act(agentA, id, { kind: 'reply', text: 'Two', attachments: [up.json().upload_id, up.json().upload_id] })).json().error).toBe('invalid_request');
    const replied = await act(agentA, id, { kind: 'reply', text: 'Here is your invoice', attachments: [up.json().upload_id] });
    expect(replied.statusCode).toBe(200);
    const media = sandbox.sent.filter((m) => m.body.to === customer && m.body.type === 'document').map((m) => m.body as { document: { link: string; caption?: string; filename?: string } });
    expect(media).toHaveLength(1);
    expect(media[0].document).toMatchObject({ caption: 'Here is your invoice', filename: 'invoice.txt', link: expect.stringMatching(/^https?:\/\//) });
    const download = await t.app.inject({ method: 'GET', url: get(media[0].document.link) });
    expect(download.statusCode).toBe(200);
    expect(download.body).toBe(bytes);
    await until(async () => ((await t.app.inject({ method: 'GET', url: `/api/console/inbox/conversations/${id}`, headers: asBrowser(agentA) })).json().messages as Array<{ text: string }>).some((m) => m.text === 'Here is your invoice'), 'the reply in the history');
    // A day later: only a template goes, and a template carries no file.
    await closeWindow(db.orm, id);
    const late = await act(agentA, id, { kind: 'reply', text: 'Again', attachments: [up.json().upload_id] });
    expect([late.statusCode, late.json().error]).toEqual([422, 'session_window_closed']);
    expect((await act(agentA, id, { kind: 'reply', template: { name: 'order_update', language: 'en', variables: ['A-1'] }, attachments: [up.json().upload_id] })).json().error).toBe('invalid_request');
    expect(sandbox.sent.filter((m) => m.body.to === customer && m.body.type === 'document')).toHaveLength(1);
  }, 40_000);

  test('a voice conversation takes no file (400 with the reason); a closed one is 409', async () => {
    const id = await handedOff();
    await db.orm.em.fork().execute(`update conversations set channel = 'voice' where id = ?`, [id]);
    const refused = await attach(agentA, id, 'x.txt', 'x');
    expect([refused.statusCode, refused.json().error, refused.json().message]).toEqual([400, 'invalid_request', expect.stringContaining('web chat and msgapp')]);
    const closed = await handedOff();
    expect((await act(agentA, closed, { kind: 'close', reason: 'resolved' })).statusCode).toBe(200);
    expect((await attach(agentA, closed, 'x.txt', 'x')).json().error).toBe('conversation_closed');
  }, 30_000);
});
