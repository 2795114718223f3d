import type { AddressInfo } from 'node:net';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, type TestApp } from '../support/app';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { frameCollector } from '../support/socket';
import { startTestWorker } from '../support/temporal';

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let ws: string;
let other: string;
let auth: Record<string, string>;
let otherAuth: Record<string, string>;
let site: { site_id: string; site_secret: string };
let base: string;
const ORIGIN = 'https://shop.example';

/** The fake model: echoes; "a person" calls the handoff tool. */
function reply(body: { messages: Array<{ role: string; content: string | null }> }) {
  const last = [...body.messages].reverse().find((m) => m.role === 'user' || m.role === 'tool');
  const text = last?.content ?? '';
  if (last?.role === 'tool') return { text: 'A colleague will take it from here.' };
  if (text.includes('a person')) return { tool_calls: [{ name: 'handoff', arguments: { reason: 'asked for a person' } }] };
  return { text: `Echo: ${text}` };
}

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply, chunkChars: 8 });
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' } });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  ws = await createWorkspace(db.orm);
  other = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish', 'conversations:read', 'conversations:write'])).key);
  otherAuth = bearer((await createKey(t.services, other, ['conversations:read', 'conversations:write'])).key);
  const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { actions: [{ type: 'handoff', message: 'A colleague will take it from here.' }] });
  site = await t.services.sites.create(ws, agentId, [ORIGIN]);
}, 60_000);

afterAll(async () => {
  await t.close();
  await tw.close();
  await llm.close();
  await db.drop();
});

const widgetHeaders = () => ({ 'x-concierge-site': site.site_id, origin: ORIGIN });
const widget = (method: 'GET' | 'POST', url: string, payload?: object) => t.app.inject({ method, url: `/api/public/widget/${url}`, headers: widgetHeaders(), payload });
const init = async () => (await widget('POST', 'init', {})).json() as { conversation_id: string };
const api = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object, headers = auth) => t.app.inject({ method, url, headers, payload });

function socket(conversationId: string) {
  return frameCollector(`ws://${base}/api/chat/connect?site_id=${site.site_id}&conversation_id=${conversationId}`, ORIGIN);
}

describe('a human takes over a web conversation', () => {
  test('handoff → a case; the agent stays silent (sync 200 with empty text, async 202, no model call); the human writes back unsolicited; resolving lets the agent answer again', async () => {
    const conv = await init();
    const id = conv.conversation_id;
    const handoff = await widget('POST', 'send', { conversation_id: id, text: 'I want a person' });
    expect(handoff.json().text).toBe('A colleague will take it from here.');
    expect((await api('GET', '/api/v1/cases')).json().cases.map((c: { id: string }) => c.id)).toContain(id);

    // While a human has it: taken, recorded, not answered, the model never asked.
    const calls = llm.requests.length;
    const held = await widget('POST', 'send', { conversation_id: id, text: 'hello? anyone?' });
    expect(held.statusCode).toBe(200);
    expect(held.json()).toEqual({ message_id: expect.stringMatching(/^msg_/), text: '' });
    const s = await socket(id);
    const heldAsync = await widget('POST', 'send', { conversation_id: id, text: 'still there?', delivery: 'async' });
    expect(heldAsync.statusCode).toBe(202);
    // The same message sent again (a client retry) is still taken and still not answered.
    const again = await widget('POST', 'send', { conversation_id: id, text: 'hello? anyone?', client_message_id: 'client-1' });
    const againRetry = await widget('POST', 'send', { conversation_id: id, text: 'hello? anyone?', client_message_id: 'client-1' });
    expect([again.statusCode, againRetry.statusCode]).toEqual([200, 200]);
    expect(againRetry.json()).toEqual({ message_id: again.json().message_id, text: '' });
    await new Promise((r) => setTimeout(r, 300));
    expect(llm.requests.length).toBe(calls);
    expect(s.frames.filter((f) => f.type === 'reply' || f.type === 'reply_delta')).toEqual([]);

    // The human's message: stored as written by a human, on the socket as an unsolicited reply, in the history.
    const out = await api('POST', '/api/v1/outbound', { channel: 'web', conversation_id: id, text: 'Hi, this is Sam from support.' });
    expect(out.statusCode).toBe(201);
    expect(out.json()).toEqual({
      id: expect.stringMatching(/^msg_/),
      channel: 'web',
      conversation_id: id,
      text: 'Hi, this is Sam from support.',
      author: 'human',
      author_name: null,
      author_avatar_url: null,
      created_at: expect.any(String),
    });
    await s.until((f) => f.some((x) => x.type === 'reply' && x.unsolicited === true));
    expect(s.frames.find((x) => x.type === 'reply')).toEqual({ type: 'reply', reply_id: out.json().id, text: 'Hi, this is Sam from support.', author: 'human', unsolicited: true });
    const history = (await widget('GET', `history?conversation_id=${id}`)).json();
    expect(history.messages.at(-1)).toMatchObject({ id: out.json().id, role: 'assistant', author: 'human', text: 'Hi, this is Sam from support.' });
    expect(history.messages.filter((m: { role: string }) => m.role === 'user').map((m: { text: string }) => m.text)).toEqual(
      expect.arrayContaining(['hello? anyone?', 'still there?']),
    );
    s.close();

    // Resolved: off the cases list, on the timeline, and the agent answers the next message.
    const resolved = await api('PATCH', `/api/v1/conversations/${id}`, { needs_human: false });
    expect(resolved.statusCode).toBe(200);
    expect(resolved.json()).toMatchObject({ id, needs_human: false, case_reason: null });
    expect((await api('GET', '/api/v1/cases')).json().cases.map((c: { id: string }) => c.id)).not.toContain(id);
    const events = (await api('GET', `/api/v1/conversations/${id}/events`)).json().events.map((e: { type: string }) => e.type);
    expect(events).toEqual(expect.arrayContaining(['handoff', 'case_resolved']));
    const answered = await widget('POST', 'send', { conversation_id: id, text: 'thanks' });
    expect(answered.json()).toEqual({ message_id: expect.stringMatching(/^msg_/), text: 'Echo: thanks' });
  }, 60_000);

  test('the widget is told who answers: handoff frames on take-over and hand-back, one per held turn (its reply_id), and /init says so after a reload', async () => {
    const { conversation_id: id } = await init();
    const s = await socket(id);
    // A socket is told first who answers now (nobody has taken over yet).
    await s.until((f) => f.some((x) => x.type === 'handoff'));
    expect(s.frames[0]).toEqual({ type: 'handoff', active: false });
    await api('PATCH', `/api/v1/conversations/${id}`, { needs_human: true });
    await s.until((f) => f.some((x) => x.type === 'handoff' && x.active));
    expect(s.frames.filter((f) => f.type === 'handoff')).toEqual([
      { type: 'handoff', active: false },
      { type: 'handoff', active: true },
    ]);
    // A client that connects now (a reload, a reconnect) is told the conversation is held before anything else.
    const late = await socket(id);
    await late.until((f) => f.length > 0);
    expect(late.frames[0]).toEqual({ type: 'handoff', active: true });
    late.close();
    // A reload: the session says a person holds it (the widget shows no typing dots for the agent).
    expect((await widget('POST', 'init', { conversation_id: id })).json()).toMatchObject({ conversation_id: id, handoff: { active: true } });
    const held = await widget('POST', 'send', { conversation_id: id, text: 'anyone?', delivery: 'async' });
    expect(held.statusCode).toBe(202);
    await s.until((f) => f.some((x) => x.type === 'handoff' && x.reply_id));
    expect(s.frames.filter((f) => f.type === 'handoff' && f.reply_id)).toEqual([{ type: 'handoff', active: true, reply_id: held.json().reply_id }]);
    // The person writes under their name and picture; the socket and the history carry them.
    const out = await api('POST', '/api/v1/outbound', { channel: 'web', conversation_id: id, text: 'Hi, Sam here.', author_name: 'Sam Rivera', author_avatar_url: 'https://cdn.example/sam.png' });
    expect(out.json()).toMatchObject({ author: 'human', author_name: 'Sam Rivera', author_avatar_url: 'https://cdn.example/sam.png' });
    await s.until((f) => f.some((x) => x.type === 'reply'));
    expect(s.frames.find((x) => x.type === 'reply')).toMatchObject({ author: 'human', author_name: 'Sam Rivera', author_avatar_url: 'https://cdn.example/sam.png', unsolicited: true });
    const history = (await widget('GET', `history?conversation_id=${id}`)).json();
    expect(history.messages.at(-1)).toMatchObject({ author: 'human', author_name: 'Sam Rivera', author_avatar_url: 'https://cdn.example/sam.png' });
    for (const bad of [{ author_avatar_url: 'http://cdn.example/sam.png' }, { author_avatar_url: 'javascript:alert(1)' }, { author_name: '  ' }, { author_name: 'x'.repeat(81) }]) {
      const res = await api('POST', '/api/v1/outbound', { channel: 'web', conversation_id: id, text: 'x', ...bad });
      expect([res.statusCode, res.json().error]).toEqual([400, 'invalid_request']);
    }
    await api('PATCH', `/api/v1/conversations/${id}`, { needs_human: false });
    await s.until((f) => f.some((x) => x.type === 'handoff' && x.active === false));
    expect((await widget('POST', 'init', { conversation_id: id })).json()).toMatchObject({ handoff: { active: false } });
    s.close();
  }, 30_000);

  test('a visitor leaves an email: unverified on the customer (never an identity), on the timeline; bad input and other visitors refused', async () => {
    const { conversation_id: id, customer_id } = (await widget('POST', 'init', {})).json() as { conversation_id: string; customer_id: string };
    const left = await widget('POST', 'contact', { conversation_id: id, customer_id, email: 'Ana@Example.com' });
    expect([left.statusCode, left.json()]).toEqual([200, { stored: true, email: 'ana@example.com' }]);
    const customer = (await api('GET', `/api/v1/customers/${customer_id}`, undefined, bearer((await createKey(t.services, ws, ['customers:read'])).key))).json();
    expect(customer.metadata).toMatchObject({ unverified: { email: 'ana@example.com' } });
    expect(customer.identities).toEqual([]);
    const events = (await api('GET', `/api/v1/conversations/${id}/events`)).json().events;
    expect(events.filter((e: { type: string }) => e.type === 'contact_email')).toEqual([expect.objectContaining({ data: { email: 'ana@example.com', verified: false } })]);
    for (const [payload, status, error] of [
      [{ conversation_id: id, email: 'not-an-email' }, 400, 'invalid_request'],
      [{ conversation_id: id }, 400, 'invalid_request'],
      [{ conversation_id: id, email: 'a@b.example', extra: 1 }, 400, 'invalid_request'],
      [{ conversation_id: 'conv_missing', email: 'a@b.example' }, 404, 'not_found'],
      [{ conversation_id: id, customer_id: 'cus_other', email: 'a@b.example' }, 403, 'forbidden'],
    ] as Array<[object, number, string]>) {
      const res = await widget('POST', 'contact', payload);
      expect([res.statusCode, res.json().error]).toEqual([status, error]);
    }
  }, 30_000);

  test('an operator flags a conversation with a reason; the flag is idempotent', async () => {
    const { conversation_id: id } = await init();
    const flagged = await api('PATCH', `/api/v1/conversations/${id}`, { needs_human: true, case_reason: 'VIP customer' });
    expect(flagged.json()).toMatchObject({ needs_human: true, case_reason: 'VIP customer' });
    const twice = await api('PATCH', `/api/v1/conversations/${id}`, { needs_human: true, case_reason: 'something else' });
    expect(twice.json()).toMatchObject({ needs_human: true, case_reason: 'VIP customer' });
    const events = (await api('GET', `/api/v1/conversations/${id}/events`)).json().events;
    expect(events.filter((e: { type: string }) => e.type === 'handoff')).toEqual([expect.objectContaining({ data: { reason: 'VIP customer', by: 'operator' } })]);
    const held = await widget('POST', 'send', { conversation_id: id, text: 'hi' });
    expect(held.json()).toEqual({ message_id: expect.stringMatching(/^msg_/), text: '' });
  }, 30_000);

  test('bad input and other tenants get the envelope, never a change', async () => {
    const { conversation_id: id } = await init();
    const cases: Array<[string, string, object, number, string]> = [
      ['PATCH', `/api/v1/conversations/${id}`, {}, 400, 'invalid_request'],
      ['PATCH', `/api/v1/conversations/${id}`, { needs_human: 'yes' }, 400, 'invalid_request'],
      ['PATCH', `/api/v1/conversations/${id}`, { needs_human: true, extra: 1 }, 400, 'invalid_request'],
      ['PATCH', `/api/v1/conversations/${id}`, { needs_human: false, case_reason: 'why' }, 400, 'invalid_request'],
      ['PATCH', '/api/v1/conversations/conv_missing', { needs_human: true }, 404, 'not_found'],
      ['POST', '/api/v1/outbound', { channel: 'web', conversation_id: id }, 400, 'invalid_request'],
      ['POST', '/api/v1/outbound', { channel: 'web', conversation_id: id, text: '   ' }, 400, 'invalid_request'],
      ['POST', '/api/v1/outbound', { channel: 'fax', conversation_id: id, text: 'x' }, 400, 'invalid_request'],
      ['POST', '/api/v1/outbound', { channel: 'msgapp', conversation_id: id, text: 'x' }, 400, 'invalid_request'],
      ['POST', '/api/v1/outbound', { channel: 'voice', conversation_id: id, text: 'x' }, 400, 'invalid_request'],
      ['POST', '/api/v1/outbound', { channel: 'web', conversation_id: 'conv_missing', text: 'x' }, 404, 'not_found'],
    ];
    for (const [method, url, payload, status, error] of cases) {
      const res = await api(method as 'PATCH' | 'POST', url, payload);
      expect([url, res.statusCode, res.json().error]).toEqual([url, status, error]);
      expect(typeof res.json().message).toBe('string');
    }
    // Another workspace cannot see, flag or write into it.
    expect((await api('PATCH', `/api/v1/conversations/${id}`, { needs_human: true }, otherAuth)).statusCode).toBe(404);
    expect((await api('POST', '/api/v1/outbound', { channel: 'web', conversation_id: id, text: 'hi from elsewhere' }, otherAuth)).statusCode).toBe(404);
    expect((await api('GET', `/api/v1/conversations/${id}`)).json()).toMatchObject({ needs_human: false });
    expect((await widget('GET', `history?conversation_id=${id}`)).json().messages).toEqual([]);
    // A key without conversations:write is refused.
    const readOnly = bearer((await createKey(t.services, ws, ['conversations:read'])).key);
    const refused = await api('PATCH', `/api/v1/conversations/${id}`, { needs_human: true }, readOnly);
    expect([refused.statusCode, refused.json().error]).toEqual([403, 'insufficient_scope']);
  }, 30_000);
});
