import { upgrade } from '../support/socket';
import type { AddressInfo } from 'node:net';
import { newId } from '../../lib/ids';
import { userHash } from '../../domain/widget/sites';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { startTestWorker } from '../support/temporal';
import { multipart } from '../support/kb';

/**
 * Widget identity and site tenancy, on the real app, database and Temporal: two
 * workspaces; in the first, two sites bound to the same agent. A verified visitor's
 * conversation answers only to that verified identity; an unverified identity is a label;
 * a conversation answers only on its own site, and not at all once that site is suspended.
 */
let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let base: string;
let wsA: string;
let wsB: string;
/** Two sites of workspace A bound to the same agent, and one site of workspace B. */
let a1: { site_id: string; site_secret: string };
let a2: { site_id: string; site_secret: string };
let b1: { site_id: string; site_secret: string };
const ORIGIN = 'https://shop.example';

const OWNER = 'owner-1';
const OWNER_SECRET_TEXT = 'my order 4242 goes to 12 Elm Street';
let ownerCtx: { external_id: string; user_hash: string };
let owner: { conversation_id: string; customer_id: string };
let ownerUpload: string;
/** An anonymous visitor's conversation on site A1, with a message and an upload. */
let anon: { conversation_id: string; customer_id: string };
let anonUpload: string;
const ANON_TEXT = 'anonymous visitor asks about returns';

async function publishedAgent(auth: Record<string, string>): Promise<string> {
  const agent = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Shop helper', instructions: 'Help shoppers.', triggers: { web_chat: { allowed_origins: [ORIGIN], file_upload: true } } },
  });
  await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.json().id}/publish`, headers: auth });
  return agent.json().id;
}

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply: () => ({ text: 'Noted.' }) });
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' } });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `ws://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;

  wsA = await createWorkspace(db.orm);
  wsB = await createWorkspace(db.orm);
  const agentA = await publishedAgent(bearer((await createKey(t.services, wsA, ['workflows:write', 'workflows:publish'])).key));
  const agentB = await publishedAgent(bearer((await createKey(t.services, wsB, ['workflows:write', 'workflows:publish'])).key));
  a1 = await t.services.sites.create(wsA, agentA, [ORIGIN]);
  a2 = await t.services.sites.create(wsA, agentA, [ORIGIN]);
  b1 = await t.services.sites.create(wsB, agentB, [ORIGIN]);

  // The owner: a verified visitor of site A1 with a message and an upload in their conversation.
  ownerCtx = { external_id: OWNER, user_hash: userHash(a1.site_secret, a1.site_id, OWNER) };
  const init = await call(a1, 'POST', 'init', { user_context: ownerCtx });
  expect(init.json().auth_level).toBe('verified');
  owner = init.json();
  const sent = await call(a1, 'POST', 'send', { conversation_id: owner.conversation_id, text: OWNER_SECRET_TEXT, user_context: ownerCtx });
  expect(sent.statusCode).toBe(200);
  const up = await uploadTo(a1, { conversation_id: owner.conversation_id, ...ownerCtx });
  expect(up.statusCode).toBe(201);
  ownerUpload = up.json().upload_id;

  anon = (await call(a1, 'POST', 'init', {})).json();
  await t.services.transcript.append({ id: newId('msg'), workspaceId: wsA, conversationId: anon.conversation_id, role: 'user', text: ANON_TEXT });
  anonUpload = (await uploadTo(a1, { conversation_id: anon.conversation_id })).json().upload_id;
}, 60_000);

afterAll(async () => {
  await t.close();
  await tw.close();
  await llm.close();
  await db.drop();
});

type Site = { site_id: string };
const headers = (site: Site) => ({ 'x-concierge-site': site.site_id, origin: ORIGIN });

function call(site: Site, method: 'GET' | 'POST', path: string, payload?: object) {
  return t.app.inject({ method, url: `/api/public/widget/${path}`, headers: headers(site), ...(payload ? { payload } : {}) });
}

function form(site: Site, path: string, fields: Record<string, string | undefined>, file: { name: string; content: string }) {
  const parts = Object.entries(fields)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([name, value]) => ({ name, value }));
  const body = multipart([...parts, { name: 'file', value: file.content, filename: file.name }]);
  return t.app.inject({ method: 'POST', url: `/api/public/widget/${path}`, headers: { ...headers(site), ...body.headers }, payload: body.payload });
}

const uploadTo = (site: Site, fields: Record<string, string | undefined>) => form(site, 'upload', fields, { name: 'note.txt', content: 'Delivery instructions: leave it with the neighbour.' });

/** Query fields of a user_context, for the GET endpoints that take the identity as query fields. */
function query(ctx: { external_id?: string; user_hash?: string } | undefined): string {
  const q = new URLSearchParams(Object.entries(ctx ?? {}).filter((e): e is [string, string] => e[1] !== undefined));
  return q.size ? `&${q}` : '';
}

/** The socket handshake's status and error code (101 when it opened). */
async function handshake(site: Site, conversationId: string): Promise<{ status: number; error?: string }> {
  const h = await upgrade(`${base}/api/chat/connect?site_id=${site.site_id}&conversation_id=${conversationId}`, ORIGIN);
  if (h.ws) {
    h.ws.close();
    return { status: 101 };
  }
  return { status: h.status, error: h.body.error };
}

type Ctx = { external_id?: string; user_hash?: string } | undefined;

/** Every widget endpoint that reads or writes a named conversation, called with a given identity. */
const endpoints: Array<[string, (site: Site, conversationId: string, upload: string, ctx: Ctx) => ReturnType<typeof call>]> = [
  ['GET /history', (s, c, _u, ctx) => call(s, 'GET', `history?conversation_id=${c}${query(ctx)}`)],
  ['POST /send', (s, c, _u, ctx) => call(s, 'POST', 'send', { conversation_id: c, text: 'let me in', user_context: ctx })],
  ['GET /tasks', (s, c, _u, ctx) => call(s, 'GET', `tasks?conversation_id=${c}${query(ctx)}`)],
  ['POST /tasks/cancel', (s, c, _u, ctx) => call(s, 'POST', 'tasks/cancel', { conversation_id: c, task_key: 'index:upl_000000000000000000000000', user_context: ctx })],
  ['POST /file_url', (s, c, u, ctx) => call(s, 'POST', 'file_url', { conversation_id: c, file_key: `upload/${u}`, user_context: ctx })],
  ['POST /upload', (s, c, _u, ctx) => uploadTo(s, { conversation_id: c, ...ctx })],
  ['GET /upload/{id}', (s, _c, u, ctx) => call(s, 'GET', `upload/${u}?${query(ctx).slice(1)}`)],
  ['GET /upload/{id}?conversation_id', (s, c, u, ctx) => call(s, 'GET', `upload/${u}?conversation_id=${c}${query(ctx)}`)],
  ['POST /transcribe', (s, c, _u, ctx) => form(s, 'transcribe', { conversation_id: c, ...ctx }, { name: 'note.wav', content: 'RIFF' })],
  ['POST /conversations/new', (s, c, _u, ctx) => call(s, 'POST', 'conversations/new', { conversation_id: c, user_context: ctx })],
  // Not built yet (501 for the rightful caller), but already behind the same checks.
  ['POST /voice/start', (s, c, _u, ctx) => call(s, 'POST', 'voice/start', { conversation_id: c, user_context: ctx })],
  ['POST /call', (s, c, _u, ctx) => call(s, 'POST', 'call', { conversation_id: c, phone_number: '+15550000000', user_context: ctx })],
];

describe('identity is a boundary', () => {
  const impostors: Array<[string, () => Ctx, string]> = [
    ["the owner's external_id without user_hash (self-asserted)", () => ({ external_id: OWNER }), 'identity_verification_required'],
    ['no user_context (anonymous)', () => undefined, 'identity_verification_required'],
    ["the owner's external_id with a wrong user_hash", () => ({ external_id: OWNER, user_hash: userHash(a1.site_secret, a1.site_id, 'owner-2') }), 'identity_verification_failed'],
    ['another verified visitor', () => ({ external_id: 'other-9', user_hash: userHash(a1.site_secret, a1.site_id, 'other-9') }), 'forbidden'],
  ];
  const cases = endpoints.flatMap(([name, fn]) => impostors.map(([who, ctx, code]) => [name, who, fn, ctx, code] as const));

  test.each(cases)("%s on a verified visitor's conversation, by %s: 403 and none of the owner's messages", async (_name, _who, fn, ctx, code) => {
    const res = await fn(a1, owner.conversation_id, ownerUpload, ctx());
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ error: code, message: expect.any(String) });
    expect(res.body).not.toContain('4242');
  });

  test('the impostors changed nothing: the conversation is still open with only the owner’s turn', async () => {
    const [row] = await db.orm.em.fork().execute('select status from conversations where id = ?', [owner.conversation_id]);
    expect(row.status).toBe('open');
    const texts = await db.orm.em.fork().execute<{ text: string }[]>(`select text from chat_messages where conversation_id = ? and role = 'user'`, [owner.conversation_id]);
    expect(texts.map((m) => m.text)).toEqual([OWNER_SECRET_TEXT]);
  });

  test('the owner, with the same verified identity, reads and writes every endpoint', async () => {
    const history = await call(a1, 'GET', `history?conversation_id=${owner.conversation_id}${query(ownerCtx)}`);
    expect(history.statusCode).toBe(200);
    expect(history.json().messages.map((m: { text: string }) => m.text)).toEqual([OWNER_SECRET_TEXT, 'Noted.']);
    expect((await call(a1, 'GET', `tasks?conversation_id=${owner.conversation_id}${query(ownerCtx)}`)).json()).toEqual({ tasks: [] });
    expect((await call(a1, 'POST', 'tasks/cancel', { conversation_id: owner.conversation_id, task_key: 'nope', user_context: ownerCtx })).json()).toEqual({ cancelled: false });
    const link = await call(a1, 'POST', 'file_url', { conversation_id: owner.conversation_id, file_key: `upload/${ownerUpload}`, user_context: ownerCtx });
    expect(link.json()).toEqual({ url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:3000\/api\/media\//) });
    expect((await call(a1, 'GET', `upload/${ownerUpload}?${query(ownerCtx).slice(1)}`)).json().status).toBe('ready');
    // No transcriber is configured here: past the identity checks, transcribe answers 503.
    expect((await form(a1, 'transcribe', { conversation_id: owner.conversation_id, ...ownerCtx }, { name: 'note.wav', content: 'RIFF' })).statusCode).not.toBe(403);
    // Past the identity checks: this agent has voice chat off.
    expect((await call(a1, 'POST', 'voice/start', { conversation_id: owner.conversation_id, user_context: ownerCtx })).json().error).toBe('voice_chat_not_enabled');
    // A new init with the identity resumes the same conversation.
    expect((await call(a1, 'POST', 'init', { user_context: ownerCtx })).json()).toMatchObject(owner);
  });

  test("init never hands a verified visitor's conversation to an impostor, not even when they name it", async () => {
    for (const ctx of [{ external_id: OWNER }, undefined, { external_id: 'other-9', user_hash: userHash(a1.site_secret, a1.site_id, 'other-9') }]) {
      for (const conversationId of [undefined, owner.conversation_id]) {
        const res = await call(a1, 'POST', 'init', { user_context: ctx, conversation_id: conversationId });
        expect(res.statusCode).toBe(200);
        expect(res.json().conversation_id).not.toBe(owner.conversation_id);
        expect(res.json().customer_id).not.toBe(owner.customer_id);
      }
    }
  });

  test('a self-asserted identity is a label on a fresh customer, never merged into the verified customer', async () => {
    const res = (await call(a1, 'POST', 'init', { user_context: { external_id: OWNER, email: 'Owner@Example.com' } })).json();
    expect(res.auth_level).toBe('self_asserted');
    const customer = await t.services.customers.get(wsA, res.customer_id);
    expect(customer).toMatchObject({ external_id: null, email: null, identities: [], metadata: { unverified: { external_id: OWNER, email: 'Owner@Example.com' } } });
    const verified = await t.services.customers.get(wsA, owner.customer_id);
    expect(verified.identities).toEqual([{ kind: 'external_id', value: OWNER }]);
  });

  test('an unverified visitor resumes only by the conversation id it was given, never by external_id', async () => {
    const first = (await call(a1, 'POST', 'init', { user_context: { external_id: 'sa-1' } })).json();
    const again = (await call(a1, 'POST', 'init', { user_context: { external_id: 'sa-1' } })).json();
    expect(again.conversation_id).not.toBe(first.conversation_id);
    expect(again.customer_id).not.toBe(first.customer_id);
    const resumed = (await call(a1, 'POST', 'init', { user_context: { external_id: 'sa-1' }, conversation_id: first.conversation_id })).json();
    expect(resumed).toMatchObject({ conversation_id: first.conversation_id, customer_id: first.customer_id });
    // The capability works without the label too, on every endpoint.
    const sent = await call(a1, 'POST', 'send', { conversation_id: first.conversation_id, text: 'hello' });
    expect(sent.json().text).toBe('Noted.');
    expect((await call(a1, 'GET', `history?conversation_id=${first.conversation_id}`)).json().messages).toHaveLength(2);
  });
});

describe('widget conversations belong to their site', () => {
  // Site A2 shares site A1's workspace and agent; site B1 is in another workspace.
  const others: Array<[string, () => Site]> = [
    ['another site of the same workspace and agent', () => a2],
    ['a site of another workspace', () => b1],
  ];
  const cases = others.flatMap(([who, site]) => endpoints.map(([name, fn]) => [name, who, site, fn] as const));

  test.each(cases)("%s from %s: refused, none of the conversation's messages", async (name, _who, site, fn) => {
    const res = await fn(site(), anon.conversation_id, anonUpload, undefined);
    expect(res.body).not.toContain('returns');
    if (name === 'POST /conversations/new') {
      // A conversation id of another site names nothing there: a fresh conversation of that site, the named one untouched.
      expect(res.statusCode).toBe(201);
      expect(res.json().conversation_id).not.toBe(anon.conversation_id);
      const [row] = await db.orm.em.fork().execute('select status from conversations where id = ?', [anon.conversation_id]);
      expect(row.status).toBe('open');
      return;
    }
    // The contract's code for file_url is 403 forbidden; upload has no not_found (a conversation_id not of the
    // site is a bad field); elsewhere the conversation (or upload) is not found.
    const expected = name === 'POST /file_url' ? [403, 'forbidden'] : name === 'POST /upload' ? [400, 'invalid_request'] : [404, 'not_found'];
    expect([res.statusCode, res.json().error]).toEqual(expected);
  });

  test.each(others)('init and the socket on %s do not reach the conversation', async (_who, site) => {
    const res = (await call(site(), 'POST', 'init', { conversation_id: anon.conversation_id })).json();
    expect(res.conversation_id).not.toBe(anon.conversation_id);
    expect(await handshake(site(), anon.conversation_id)).toEqual({ status: 403, error: 'forbidden' });
    // Its own site still reaches it.
    expect((await handshake(a1, anon.conversation_id)).status).toBe(101);
    expect((await call(a1, 'POST', 'init', { conversation_id: anon.conversation_id })).json().conversation_id).toBe(anon.conversation_id);
  });

  test("a suspended site's conversations are unreachable from any site", async () => {
    await t.services.sites.setStatus(a1.site_id, 'suspended');
    try {
      for (const site of [a1, a2]) {
        const history = await call(site, 'GET', `history?conversation_id=${anon.conversation_id}`);
        expect(history.statusCode).toBe(site === a1 ? 403 : 404);
        expect(history.body).not.toContain('returns');
        expect((await call(site, 'POST', 'send', { conversation_id: anon.conversation_id, text: 'x' })).statusCode).toBe(site === a1 ? 403 : 404);
        expect((await handshake(site, anon.conversation_id)).status).toBe(403);
      }
      expect((await call(a1, 'GET', `history?conversation_id=${anon.conversation_id}`)).json().error).toBe('site_suspended');
    } finally {
      await t.services.sites.setStatus(a1.site_id, 'active');
    }
  });
});

describe('user_hash is bound to the identity kind', () => {
  test('a hash signed for an external_id never lists the conversations of the visitor with that phone or email', async () => {
    const phone = '+15557770001';
    const email = 'pat@example.com';
    const visitor = (await call(a1, 'POST', 'init', {})).json();
    await t.services.transcript.append({ id: newId('msg'), workspaceId: wsA, conversationId: visitor.conversation_id, role: 'user', text: 'phone visitor' });
    await t.services.customers.link(wsA, { customer_id: visitor.customer_id, phone, email });
    const list = async (q: string) => (await call(a1, 'GET', `conversations?${q}`)).json().conversations.map((c: { conversation_id: string }) => c.conversation_id);
    const hash = (subject: string) => userHash(a1.site_secret, a1.site_id, subject);

    expect(await list(`phone=${encodeURIComponent(phone)}&user_hash=${hash(phone)}`)).toEqual([]);
    expect(await list(`email=${encodeURIComponent(email)}&user_hash=${hash(email)}`)).toEqual([]);
    expect(await list(`email=${encodeURIComponent(email)}&user_hash=${hash(`phone:${email}`)}`)).toEqual([]);
    expect(await list(`phone=${encodeURIComponent(phone)}&user_hash=${hash(`phone:${phone}`)}`)).toEqual([visitor.conversation_id]);
    expect(await list(`email=${encodeURIComponent(email)}&user_hash=${hash(`email:${email}`)}`)).toEqual([visitor.conversation_id]);
    // Site A2 (same workspace and agent) lists none of site A1's conversations, with its own valid hash.
    expect((await call(a2, 'GET', `conversations?phone=${encodeURIComponent(phone)}&user_hash=${userHash(a2.site_secret, a2.site_id, `phone:${phone}`)}`)).json()).toEqual({ conversations: [] });
  });
});

describe('conversations/new', () => {
  test('is a creation: 201 with the fresh conversation', async () => {
    const res = await call(a1, 'POST', 'conversations/new', { user_context: ownerCtx });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({ conversation_id: expect.stringMatching(/^conv_/), customer_id: owner.customer_id });
    // The owner's previous conversation closed; init now resumes the fresh one.
    expect((await call(a1, 'POST', 'init', { user_context: ownerCtx })).json().conversation_id).toBe(res.json().conversation_id);
  });
});
