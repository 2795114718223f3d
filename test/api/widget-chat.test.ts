import { Client as PgClient } from 'pg';
import type { AddressInfo } from 'node:net';
import { ChatFrameSchema } from '../../api/schemas/socket';
import { newId } from '../../lib/ids';
import { userHash } from '../../domain/widget/sites';
import { conversationWorkflow, RETRY_FAILED_TURN_PATCH } from '../../workflows/conversation';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, type TestApp } from '../support/app';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { frameCollector } from '../support/socket';
import { historySteps, maybeRecordHistory, startTestWorker } from '../support/temporal';
import { LOCAL_DB_STEPS_PATCH } from '../../workflows/short-steps';
import { indexed, startIndexDispatcher, upload } from '../support/kb';
import { answerOf } from '../support/http-error';

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let ws: string;
let site: { site_id: string; site_secret: string };
let base: string;
const ORIGIN = 'https://shop.example';

/** The next "cut me off" stream breaks off. */
let cutNext = true;
/** The next "fail the first time" turn is refused by the model. */
let failNext = true;

/** The fake model: echoes, except for scripted phrases. */
function reply(body: { messages: Array<{ role: string; content: string | null }> }) {
  const last = [...body.messages].reverse().find((m) => m.role === 'user' || m.role === 'tool');
  const text = last?.content ?? '';
  const asked = [...body.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
  // Citations: the answer marks the one passage it used with the number the prompt gave it; another answers with no marker.
  if (asked.includes('how long do I have to return my boots')) {
    const system = body.messages.find((m) => m.role === 'system')?.content ?? '';
    // The label of the passage that holds the sentence: the last one before it.
    const at = system.indexOf('Unworn boots');
    const n = [...system.matchAll(/^\[(\d+)\] \(file: /gm)].filter((m) => m.index < at).at(-1)?.[1];
    return { text: `Unworn boots can be sent back within 45 days [${n}]. Anything else?` };
  }
  if (asked.includes('when will my boots ship')) return { text: 'Good news: boots ship within three working days from Leeds.' };
  // Refused the first time (a 400: the turn fails for good), answered when the visitor retries.
  if (asked.includes('fail the first time')) return failNext ? ((failNext = false), { status: 400, text: 'bad request' }) : { text: 'Answered on the retry.' };
  // The first answer is cut off mid-stream (the connection reset); the turn's retry answers whole.
  if (asked.includes('cut me off')) return cutNext ? ((cutNext = false), { text: 'This answer breaks off before it ends.', cut: { afterEvents: 4, how: 'reset' as const } }) : { text: 'The whole answer, on the retry.' };
  // An answer and a tool call in one round; after the result, nothing more to say, or a follow-up.
  if (/when do you close/.test(asked)) {
    if (last?.role === 'tool') return { text: asked.includes('sunday') ? 'Anything else I can help with?' : '' };
    return { text: 'We close at 6 pm on weekdays.', tool_calls: [{ name: 'suggest_replies', arguments: { suggestions: ['Opening hours on Saturday'] } }] };
  }
  if (last?.role === 'tool' && text.includes('is attached under your answer')) return { text: 'Here is the form.' };
  if (last?.role === 'tool' && text.includes('"sent"')) return { text: 'I opened your orders page.' };
  if (last?.role === 'tool') return { text: /Shown under your answer|invalid show_chart/.test(text) ? 'Here is the overview.' : 'A colleague will take it from here.' };
  if (text.includes('the returns form')) {
    const system = body.messages.find((m) => m.role === 'system')?.content ?? '';
    const fileId = /file_id: (file_[0-9a-f]{24})/.exec(system)?.[1];
    return { tool_calls: [{ name: 'attach_file', arguments: { file_id: 'file_000000000000000000000000' } }, { name: 'attach_file', arguments: { file_id: fileId } }] };
  }
  if (text.includes('hours as a table')) return { text: 'Our hours:\n\n| Day | Hours |\n|---|---|\n| Mon–Fri | 9–18 | late |\n| Sat |' };
  if (text.includes('show me my orders')) {
    return {
      tool_calls: [
        // Refused: not on the site's list, a script URL, an unknown argument; then the allowed one.
        { name: 'page_command', arguments: { command: 'open_url', args: { url: 'https://elsewhere.example' } } },
        { name: 'page_command', arguments: { command: 'navigate', args: { url: 'javascript:alert(1)' } } },
        { name: 'page_command', arguments: { command: 'navigate', args: { url: '/orders', target: '_top' } } },
        { name: 'page_command', arguments: { command: 'navigate', args: { url: '/orders' } } },
      ],
    };
  }
  if (text.includes('orders per month')) {
    return {
      tool_calls: [
        { name: 'suggest_replies', arguments: { suggestions: ['Track my order', 'Talk to a person'] } },
        { name: 'show_card', arguments: { title: 'Winter sale', text: 'Boots at 30% off.', image_url: 'https://shop.example/boots.png', buttons: [{ label: 'Shop', url: 'https://shop.example/sale' }, { label: 'Tell me more', reply: 'Tell me more about the sale' }] } },
        { name: 'show_chart', arguments: { type: 'bar', title: 'Orders', labels: ['Sep', 'Oct', 'Nov'], series: [{ name: 'orders', values: [3, 5, 2] }] } },
        // Invalid: a card link that is not https, and a chart whose values do not match its labels. Both are refused.
        { name: 'show_card', arguments: { title: 'Click', buttons: [{ label: 'Go', url: 'javascript:alert(1)' }] } },
        { name: 'show_chart', arguments: { type: 'pie', labels: ['a', 'b'], series: [{ name: 'x', values: [1] }] } },
      ],
    };
  }
  if (text.includes('please fail')) return { status: 400, text: 'bad request' };
  if (text.includes('card on file')) return { text: 'The card on file is 4111 1111 1111 1111; receipts go to jane@example.com.' };
  if (text.includes('a person')) return { tool_calls: [{ name: 'handoff', arguments: { reason: 'asked for a person' } }] };
  return { text: `Echo: ${text}` };
}

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply, chunkChars: 4 });
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' }, uploadIndexChars: 500 });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue }, serviceOptions: { uploadIndexChars: 500 } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  ws = await createWorkspace(db.orm);
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { actions: [{ type: 'handoff', message: 'A colleague will take it from here.' }] });
  site = await t.services.sites.create(ws, agentId, [ORIGIN]);
}, 60_000);

afterAll(async () => {
  await t.close();
  await tw.close();
  await llm.close();
  await db.drop();
});

const headers = () => ({ 'x-concierge-site': site.site_id, origin: ORIGIN });
const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url: `/api/public/widget/${url}`, headers: headers(), payload });
const get = (url: string) => t.app.inject({ method: 'GET', url: `/api/public/widget/${url}`, headers: headers() });
const init = async (payload: object = {}) => (await post('init', payload)).json() as { conversation_id: string; customer_id: string };

/** A socket on the conversation, collecting frames. */
function socket(conversationId: string) {
  return frameCollector(`ws://${base}/api/chat/connect?site_id=${site.site_id}&conversation_id=${conversationId}`, ORIGIN);
}

describe('send', () => {
  test('sync: the reply in the response body, both messages in the history', async () => {
    const conv = await init();
    const res = await post('send', { conversation_id: conv.conversation_id, customer_id: conv.customer_id, text: 'where is my order?' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ message_id: expect.stringMatching(/^msg_/), text: 'Echo: where is my order?' });
    const history = (await get(`history?conversation_id=${conv.conversation_id}`)).json();
    expect(history.messages.map((m: { role: string; text: string }) => [m.role, m.text])).toEqual([
      ['user', 'where is my order?'],
      ['assistant', 'Echo: where is my order?'],
    ]);
    expect(history.messages[1].id).toBe(res.json().message_id);
    // The model saw the agent's instructions.
    const request = llm.requests.at(-1)!.body;
    expect(request.messages[0]).toMatchObject({ role: 'system', content: expect.stringContaining('Help shoppers.') });
  });

  test('a photo with no text attached: the model is told an image was attached, by name and type', async () => {
    const conv = await init();
    const photo = newId('upl');
    // What POST /upload stores for a photo OCR finds no text in: ready, parsed_chars 0.
    await db.orm.em.fork().execute(
      `insert into widget_uploads (id, workspace_id, site_id, conversation_id, file_name, mime_type, size_bytes, blob_key, status, content, parsed_chars)
       values (?, ?, ?, ?, 'broken-lamp.jpg', 'image/jpeg', 1, 'none', 'ready', '', 0)`,
      [photo, ws, site.site_id, conv.conversation_id],
    );
    const res = await post('send', { conversation_id: conv.conversation_id, text: 'it arrived like this', file_refs: [photo] });
    expect(res.statusCode).toBe(200);
    const user = llm.requests.at(-1)!.body.messages.at(-1);
    expect(user).toEqual({ role: 'user', content: 'it arrived like this\n\n[Attached an image, "broken-lamp.jpg" (image/jpeg); no text could be read from it]' });
  });

  test('async: 202 at once, then deltas and the authoritative reply with the same reply_id on the socket', async () => {
    const conv = await init();
    const s = await socket(conv.conversation_id);
    const res = await post('send', { conversation_id: conv.conversation_id, text: 'streaming please', delivery: 'async' });
    expect(res.statusCode).toBe(202);
    const body = res.json();
    expect(body).toEqual({ accepted: true, message_id: expect.stringMatching(/^msg_/), reply_id: expect.stringMatching(/^msg_/), server_time: expect.any(String) });
    await s.until((f) => f.some((x) => x.type === 'reply'));
    const deltas = s.frames.filter((f) => f.type === 'reply_delta');
    const final = s.frames.find((f) => f.type === 'reply')!;
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.every((d) => d.reply_id === body.reply_id)).toBe(true);
    expect(deltas.map((d) => d.text).join('')).toBe('Echo: streaming please');
    expect(final).toEqual({ type: 'reply', reply_id: body.reply_id, text: 'Echo: streaming please' });
    // The final frame comes after every delta.
    expect(s.frames.indexOf(final)).toBeGreaterThan(s.frames.indexOf(deltas.at(-1)!));
    s.close();
  });

  test('a stream cut off mid-answer: the retried turn\'s first delta resets the live bubble, so the deltas read as the final reply', async () => {
    const conv = await init();
    const s = await socket(conv.conversation_id);
    const res = await post('send', { conversation_id: conv.conversation_id, text: 'cut me off please', delivery: 'async' });
    const replyId = res.json().reply_id;
    await s.until((f) => f.some((x) => x.type === 'reply' && x.reply_id === replyId));
    const deltas = s.frames.filter((f) => f.type === 'reply_delta' && f.reply_id === replyId);
    const final = s.frames.find((f) => f.type === 'reply' && f.reply_id === replyId)!;
    expect(final.text).toBe('The whole answer, on the retry.');
    // The cut attempt streamed part of its answer; exactly one delta (the retry's first) says to start over.
    const resets = deltas.filter((d) => d.reset === true);
    expect(resets).toHaveLength(1);
    // As the served document describes the frame.
    expect(ChatFrameSchema.safeParse(resets[0]).success).toBe(true);
    const first = deltas.indexOf(resets[0]);
    expect(first).toBeGreaterThan(0);
    // (Trailing spaces wait for the next delta, which could open a citation marker that takes them with it.)
    expect(deltas.slice(0, first).map((d) => d.text).join('')).toBe('This answer');
    // A bubble that applies `reset` shows what the final frame says; gluing the pieces would not.
    const live = deltas.reduce((text, d) => (d.reset ? '' : text) + d.text, '');
    expect(live).toBe(final.text);
    expect(deltas.map((d) => d.text).join('')).not.toBe(final.text);
    const history = (await get(`history?conversation_id=${conv.conversation_id}`)).json();
    expect(history.messages.map((m: { role: string; text: string }) => [m.role, m.text])).toEqual([
      ['user', 'cut me off please'],
      ['assistant', 'The whole answer, on the retry.'],
    ]);
    s.close();
  });

  test('a repeat of a message whose turn failed runs the turn again on the stored message: stored once, answered once', async () => {
    const conv = await init();
    const s = await socket(conv.conversation_id);
    const payload = { conversation_id: conv.conversation_id, text: 'fail the first time', client_message_id: 'client-retry', delivery: 'async' };
    const first = (await post('send', payload)).json();
    await s.until((f) => f.some((x) => x.type === 'error' && x.reply_id === first.reply_id));
    const again = await post('send', payload);
    expect(again.statusCode).toBe(202);
    // The same message; a new reply id, the failed one's error frame being final.
    expect(again.json().message_id).toBe(first.message_id);
    expect(again.json().reply_id).not.toBe(first.reply_id);
    await s.until((f) => f.some((x) => x.type === 'reply' && x.reply_id === again.json().reply_id));
    expect(s.frames.find((f) => f.type === 'reply' && f.reply_id === again.json().reply_id)!.text).toBe('Answered on the retry.');
    // The model read the question once in the retried turn.
    expect(llm.requests.at(-1)!.body.messages.filter((m: { role: string; content: string }) => m.role === 'user' && m.content === 'fail the first time')).toHaveLength(1);
    const history = (await get(`history?conversation_id=${conv.conversation_id}`)).json();
    expect(history.messages.map((m: { role: string; text: string }) => [m.role, m.text])).toEqual([
      ['user', 'fail the first time'],
      ['assistant', 'Answered on the retry.'],
    ]);
    // The actor ran the second turn behind its patch (replayed from test/replay/histories).
    expect((await historySteps(tw.client, `conversation:${conv.conversation_id}`)).patches).toContain(RETRY_FAILED_TURN_PATCH);
    await maybeRecordHistory(tw.client, `conversation:${conv.conversation_id}`, 'conversation-retry-failed-turn');
    // Answered now: a further repeat is a duplicate with the answered ids, and no turn runs.
    const before = llm.requests.length;
    const third = (await post('send', { ...payload, delivery: 'sync' })).json();
    expect(third).toEqual({ message_id: again.json().reply_id, text: 'Answered on the retry.' });
    expect(llm.requests.length).toBe(before);
    s.close();
  });

  test('a second socket of the conversation (another tab) is told of the visitor\'s message as a visitor_message frame, once, then gets the reply', async () => {
    const conv = await init();
    const other = await socket(conv.conversation_id);
    const payload = { conversation_id: conv.conversation_id, text: 'from the first tab', client_message_id: 'tab-1', delivery: 'async' };
    const sent = (await post('send', payload)).json();
    await other.until((f) => f.some((x) => x.type === 'reply' && x.reply_id === sent.reply_id));
    const told = other.frames.filter((f) => f.type === 'visitor_message');
    expect(told).toEqual([
      { type: 'visitor_message', message_id: sent.message_id, client_message_id: 'tab-1', reply_id: sent.reply_id, text: 'from the first tab', timestamp: expect.any(String) },
    ]);
    expect(ChatFrameSchema.safeParse(told[0]).success).toBe(true);
    // Never a `reply` for the visitor's words.
    expect(other.frames.filter((f) => f.type === 'reply').map((f) => f.text)).toEqual(['Echo: from the first tab']);
    // A repeat of the same message is not announced again.
    await post('send', payload);
    await new Promise((r) => setTimeout(r, 300));
    expect(other.frames.filter((f) => f.type === 'visitor_message')).toHaveLength(1);
    other.close();
  });

  test('a repeated client_message_id is one message and one turn (async and sync)', async () => {
    const conv = await init();
    const before = llm.requests.length;
    const payload = { conversation_id: conv.conversation_id, text: 'only once', client_message_id: 'client-1', delivery: 'async' };
    const [a, b] = await Promise.all([post('send', payload), post('send', payload)]);
    const c = await post('send', { ...payload, delivery: 'sync' });
    expect([a.statusCode, b.statusCode, c.statusCode]).toEqual([202, 202, 200]);
    expect(b.json().message_id).toBe(a.json().message_id);
    expect(b.json().reply_id).toBe(a.json().reply_id);
    expect(c.json()).toEqual({ message_id: a.json().reply_id, text: 'Echo: only once' });
    expect(llm.requests.length - before).toBe(1);
    const history = (await get(`history?conversation_id=${conv.conversation_id}`)).json();
    expect(history.messages).toHaveLength(2);
  });

  test('the handoff tool flags the conversation for a human; tool activity stays out of the history', async () => {
    const conv = await init();
    const res = await post('send', { conversation_id: conv.conversation_id, text: 'I want a person' });
    expect(res.json().text).toBe('A colleague will take it from here.');
    const [row] = await db.orm.em.fork().execute('select needs_human, case_reason from conversations where id = ?', [conv.conversation_id]);
    expect(row).toEqual({ needs_human: true, case_reason: 'asked for a person' });
    const tools = await db.orm.em.fork().execute(`select text from chat_messages where conversation_id = ? and role = 'tool'`, [conv.conversation_id]);
    expect(tools).toHaveLength(1);
    const history = (await get(`history?conversation_id=${conv.conversation_id}`)).json();
    expect(history.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant']);
  });

  test('a turn the model refuses: sync 502, async an error frame with the reply_id', async () => {
    const conv = await init();
    const sync = await post('send', { conversation_id: conv.conversation_id, text: 'please fail' });
    expect(sync.statusCode).toBe(502);
    expect(sync.json().error).toBe('workflow_execution_failed');
    const s = await socket(conv.conversation_id);
    const res = await post('send', { conversation_id: conv.conversation_id, text: 'please fail again', delivery: 'async' });
    await s.until((f) => f.some((x) => x.type === 'error'));
    expect(s.frames.find((f) => f.type === 'error')).toEqual({ type: 'error', reply_id: res.json().reply_id, code: 'workflow_execution_failed', text: expect.any(String) });
    s.close();
  });

  test('bad sends: empty text, too many file_refs, unknown or closed conversation, identity re-checked', async () => {
    const conv = await init();
    const empty = await post('send', { conversation_id: conv.conversation_id, text: '  ' });
    expect(empty.statusCode).toBe(400);
    expect(empty.json()).toEqual({ error: 'invalid_request', message: expect.stringContaining('file_refs') });
    const six = await post('send', { conversation_id: conv.conversation_id, text: 'x', file_refs: ['a', 'b', 'c', 'd', 'e', 'f'] });
    expect(six.statusCode).toBe(400);
    expect((await post('send', { conversation_id: 'conv_nope', text: 'x' })).statusCode).toBe(404);
    const badHash = await post('send', { conversation_id: conv.conversation_id, text: 'x', user_context: { external_id: 'u1', user_hash: 'ab'.repeat(32) } });
    expect(badHash.statusCode).toBe(403);
    expect(badHash.json().error).toBe('identity_verification_failed');
    const otherCustomer = await post('send', { conversation_id: conv.conversation_id, customer_id: 'cus_other', text: 'x' });
    expect(otherCustomer.statusCode).toBe(403);
    await db.orm.em.fork().execute(`update conversations set status = 'closed' where id = ?`, [conv.conversation_id]);
    const closed = await post('send', { conversation_id: conv.conversation_id, text: 'x' });
    expect(closed.statusCode).toBe(409);
    expect(closed.json().error).toBe('conversation_closed');
  });

  test('the actor continues as new after its turns per run and still deduplicates', async () => {
    const conv = await init();
    // Started here with a short run so the API's update-with-start joins it.
    await tw.client.workflow.start(conversationWorkflow, {
      workflowId: `conversation:${conv.conversation_id}`,
      taskQueue: tw.taskQueue,
      args: [{ conversationId: conv.conversation_id, workspaceId: ws, turnsPerRun: 2 }],
    });
    for (const n of [1, 2, 3]) {
      const res = await post('send', { conversation_id: conv.conversation_id, text: `turn ${n}`, client_message_id: `c${n}` });
      expect(res.json().text).toBe(`Echo: turn ${n}`);
    }
    const before = llm.requests.length;
    // c1 was answered two runs ago: the same reply, no new turn.
    const again = await post('send', { conversation_id: conv.conversation_id, text: 'turn 1', client_message_id: 'c1' });
    expect(again.json().text).toBe('Echo: turn 1');
    expect(llm.requests.length).toBe(before);
    const runs = [];
    for await (const w of tw.client.workflow.list({ query: `WorkflowId = 'conversation:${conv.conversation_id}'` })) runs.push(w);
    expect(runs.length).toBeGreaterThanOrEqual(2);
  });
});

describe('history paging', () => {
  test('the latest `limit` older than `before`, oldest first; pages join to the whole transcript', async () => {
    const conv = await init();
    const ids: string[] = [];
    for (let i = 0; i < 45; i++) {
      const id = newId('msg');
      ids.push(id);
      await t.services.transcript.append({ id, workspaceId: ws, conversationId: conv.conversation_id, role: i % 2 ? 'assistant' : 'user', text: `m${i}` });
      if (i === 10) await t.services.transcript.append({ id: newId('msg'), workspaceId: ws, conversationId: conv.conversation_id, role: 'tool', text: '{}' });
    }
    const seen: string[] = [];
    let before: string | undefined;
    const pages: boolean[] = [];
    for (;;) {
      const page = (await get(`history?conversation_id=${conv.conversation_id}&limit=20${before ? `&before=${encodeURIComponent(before)}` : ''}`)).json();
      const times = page.messages.map((m: { timestamp: string }) => Date.parse(m.timestamp));
      expect([...times].sort((a, b) => a - b)).toEqual(times);
      seen.unshift(...page.messages.map((m: { id: string }) => m.id));
      pages.push(page.has_more);
      if (!page.has_more) break;
      expect(page.next_before).toBe(page.messages[0].timestamp);
      before = page.next_before;
    }
    expect(pages).toEqual([true, true, false]);
    expect(seen).toEqual(ids);
  });

  test('defaults, cap, invalid before ignored, missing conversation_id 400', async () => {
    const conv = await init();
    for (let i = 0; i < 25; i++) await t.services.transcript.append({ id: newId('msg'), workspaceId: ws, conversationId: conv.conversation_id, role: 'user', text: `m${i}` });
    const dflt = (await get(`history?conversation_id=${conv.conversation_id}`)).json();
    expect(dflt.messages).toHaveLength(20);
    expect(dflt.messages.at(-1).text).toBe('m24');
    const invalid = (await get(`history?conversation_id=${conv.conversation_id}&before=yesterday-ish`)).json();
    expect(invalid).toEqual(dflt);
    const capped = await get(`history?conversation_id=${conv.conversation_id}&limit=500`);
    expect(capped.statusCode).toBe(200);
    expect(capped.json().messages).toHaveLength(25);
    const missing = await get('history');
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error).toBe('invalid_request');
  });
});

describe('conversations', () => {
  test('only a verified visitor gets their conversations; new closes the open one', async () => {
    const hash = userHash(site.site_secret, site.site_id, 'visitor-7');
    const first = await init({ user_context: { external_id: 'visitor-7', user_hash: hash } });
    await post('send', { conversation_id: first.conversation_id, text: 'first question', user_context: { external_id: 'visitor-7', user_hash: hash } });
    const list = (await get(`conversations?external_id=visitor-7&user_hash=${hash}`)).json();
    expect(list.conversations).toEqual([{ conversation_id: first.conversation_id, title: 'first question', preview: 'Echo: first question', updated_at: expect.any(String) }]);
    expect((await get('conversations?external_id=visitor-7')).json()).toEqual({ conversations: [] });
    expect((await get(`conversations?external_id=visitor-7&user_hash=${'0'.repeat(64)}`)).json()).toEqual({ conversations: [] });
    expect((await get('conversations')).json()).toEqual({ conversations: [] });

    const fresh = await post('conversations/new', { user_context: { external_id: 'visitor-7', user_hash: hash } });
    expect(fresh.statusCode).toBe(201);
    expect(fresh.json()).toEqual({ conversation_id: expect.stringMatching(/^conv_/), customer_id: first.customer_id });
    expect(fresh.json().conversation_id).not.toBe(first.conversation_id);
    const old = await post('send', { conversation_id: first.conversation_id, text: 'still there?', user_context: { external_id: 'visitor-7', user_hash: hash } });
    expect(old.json().error).toBe('conversation_closed');
    // The closed conversation's actor finishes.
    await tw.client.workflow.getHandle(`conversation:${first.conversation_id}`).result();
    await maybeRecordHistory(tw.client, `conversation:${first.conversation_id}`, 'conversation');
    const after = (await get(`conversations?external_id=visitor-7&user_hash=${hash}&limit=1`)).json();
    expect(after.conversations.map((c: { conversation_id: string }) => c.conversation_id)).toEqual([fresh.json().conversation_id]);
  });

  test('an anonymous visitor closes the conversation they name', async () => {
    const conv = await init();
    const fresh = (await post('conversations/new', { conversation_id: conv.conversation_id })).json();
    expect(fresh.customer_id).toBe(conv.customer_id);
    const [row] = await db.orm.em.fork().execute('select status from conversations where id = ?', [conv.conversation_id]);
    expect(row.status).toBe('closed');
  });
});

describe('widget rate limits', () => {
  test('sends per conversation and requests per site and client address: 429 rate_limited with Retry-After', async () => {
    const limited = await startTestApp({
      orm: db.orm,
      databaseUrl: db.url,
      temporal: { client: tw.client, taskQueue: tw.taskQueue },
      widgetLimits: { perSiteClient: 8, sendsPerConversation: 2 },
    });
    try {
      const call = (url: string, payload?: object) =>
        limited.app.inject({ method: payload ? 'POST' : 'GET', url: `/api/public/widget/${url}`, headers: headers(), ...(payload ? { payload } : {}) });
      const conv = (await call('init', {})).json();
      const sends = [];
      for (let i = 0; i < 3; i++) sends.push(await call('send', { conversation_id: conv.conversation_id, text: `n${i}` }));
      expect(sends.map((r) => r.statusCode)).toEqual([200, 200, 429]);
      expect(sends[2].json()).toEqual({ error: 'rate_limited', message: expect.stringContaining('sends per conversation') });
      expect(Number(sends[2].headers['retry-after'])).toBeGreaterThan(0);
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await call(`history?conversation_id=${conv.conversation_id}`)).statusCode);
      // 1 init + 3 sends + 4 reads = 8 allowed; the 9th request is refused.
      expect(statuses).toEqual([200, 200, 200, 200, 429]);
    } finally {
      await limited.close();
    }
  });
});

describe('background tasks', () => {
  /** A ready upload of the conversation, long enough to be indexed for search first. */
  async function longUpload(conversationId: string, name: string): Promise<string> {
    const id = newId('upl');
    const content = Array.from({ length: 40 }, (_, i) => `Clause ${i}: the tenant pays rent on the first day of each month; deposits are returned within ${i + 10} days.`).join('\n');
    await db.orm.em.fork().execute(
      `insert into widget_uploads (id, workspace_id, site_id, conversation_id, file_name, mime_type, size_bytes, blob_key, status, content, parsed_chars)
       values (?, ?, ?, ?, ?, 'text/plain', ?, 'none', 'ready', ?, ?)`,
      [id, ws, site.site_id, conversationId, name, content.length, content, content.length],
    );
    return id;
  }

  test('a long attachment is read by a blocking task: listed, 409 task_in_progress meanwhile, task_status frames, then the turn uses it', async () => {
    const conv = await init();
    const upload = await longUpload(conv.conversation_id, 'lease.txt');
    const s = await socket(conv.conversation_id);
    // Hold the task's write so it stays running while we look.
    const blocker = new PgClient({ connectionString: db.url });
    await blocker.connect();
    await blocker.query('begin');
    await blocker.query('lock table widget_upload_chunks in exclusive mode');
    const sent = await post('send', { conversation_id: conv.conversation_id, text: 'when is the deposit returned?', file_refs: [upload], delivery: 'async' });
    expect(sent.statusCode).toBe(202);
    await s.until((f) => f.some((x) => x.type === 'task_status'));
    const tasks = (await get(`tasks?conversation_id=${conv.conversation_id}`)).json();
    expect(tasks).toEqual({ tasks: [{ task_key: `index:${upload}`, label: 'Reading lease.txt', status: 'running', blocking: true, started_at: expect.any(String) }] });
    const busy = await post('send', { conversation_id: conv.conversation_id, text: 'hello?' });
    expect(busy.statusCode).toBe(409);
    expect(busy.json()).toEqual({ error: 'task_in_progress', message: expect.stringContaining('Reading lease.txt'), label: 'Reading lease.txt', task_key: `index:${upload}` });
    // Refused, so not kept: the transcript holds only the message that started the task.
    const refusedHistory = (await get(`history?conversation_id=${conv.conversation_id}`)).json();
    expect(refusedHistory.messages.map((m: { text: string }) => m.text)).toEqual(['when is the deposit returned?']);
    await blocker.query('rollback');
    await blocker.end();
    await s.until((f) => f.some((x) => x.type === 'reply'));
    expect(s.frames.filter((f) => f.type === 'task_status').map((f) => f.status)).toEqual(['running', 'completed']);
    // The turn ran after the task: the model saw the attachment and the indexed passages, named by file.
    const request = llm.requests.at(-1)!.body;
    expect(request.messages[0].content).toContain('(file: lease.txt)');
    expect(request.messages.at(-1).content).toContain('[Attached file "lease.txt"]');
    expect((await get(`tasks?conversation_id=${conv.conversation_id}`)).json()).toEqual({ tasks: [] });
    const [{ n }] = await db.orm.em.fork().execute('select count(*)::int as n from widget_upload_chunks where upload_id = ?', [upload]);
    expect(n).toBeGreaterThan(0);
    await maybeRecordHistory(tw.client, `conversation:${conv.conversation_id}:task:index:${upload}`, 'upload-index-task');
    await maybeRecordHistory(tw.client, `conversation:${conv.conversation_id}`, 'conversation-with-task-local-steps');
    // The task's row and frames were written by local activities (behind the patch); the turn went through the task queue.
    expect(await historySteps(tw.client, `conversation:${conv.conversation_id}`)).toEqual({
      eager: false,
      activities: ['runAgentTurn'],
      localActivities: ['recordTaskStarted', 'recordTaskFinished'],
      patches: [LOCAL_DB_STEPS_PATCH],
    });
    s.close();
  });

  test('cancel: the running task stops, the visitor is told, the waiting turn goes on; unknown tasks are not cancelled', async () => {
    const conv = await init();
    const upload = await longUpload(conv.conversation_id, 'contract.txt');
    const s = await socket(conv.conversation_id);
    const blocker = new PgClient({ connectionString: db.url });
    await blocker.connect();
    await blocker.query('begin');
    await blocker.query('lock table widget_upload_chunks in exclusive mode');
    try {
      await post('send', { conversation_id: conv.conversation_id, text: 'summarise it', file_refs: [upload], delivery: 'async' });
      await s.until((f) => f.some((x) => x.type === 'task_status'));
      const cancelled = await post('tasks/cancel', { conversation_id: conv.conversation_id, task_key: `index:${upload}` });
      expect(cancelled.json()).toEqual({ cancelled: true });
      await s.until((f) => f.some((x) => x.type === 'reply'));
      expect(s.frames.filter((f) => f.type === 'task_status').map((f) => f.status)).toEqual(['running', 'cancelled']);
      expect((await post('tasks/cancel', { conversation_id: conv.conversation_id, task_key: `index:${upload}` })).json()).toEqual({ cancelled: false });
      expect((await post('tasks/cancel', { conversation_id: conv.conversation_id, task_key: 'nope' })).json()).toEqual({ cancelled: false });
    } finally {
      await blocker.query('rollback');
      await blocker.end();
      s.close();
    }
  });
});

describe('reply elements (agent action reply_elements)', () => {
  test('suggested actions, a card and a chart from the model, validated; invalid ones refused and never sent; not offered to agents without the action', async () => {
    const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
    const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { name: 'Elements helper', actions: [{ type: 'reply_elements', kinds: ['suggested_actions', 'cards', 'charts'] }] });
    const elementsSite = await t.services.sites.create(ws, agentId, [ORIGIN]);
    const call = (url: string, payload?: object) =>
      t.app.inject({ method: payload ? 'POST' : 'GET', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': elementsSite.site_id, origin: ORIGIN }, payload });
    const conv = (await call('init', {})).json();
    const tools = () => (llm.requests.at(-1)!.body.tools ?? []).map((x: { function: { name: string } }) => x.function.name);
    const res = await call('send', { conversation_id: conv.conversation_id, text: 'how many orders per month?' });
    expect(tools()).toEqual(['suggest_replies', 'show_card', 'show_chart']);
    expect(res.json()).toEqual({
      message_id: expect.stringMatching(/^msg_/),
      text: 'Here is the overview.',
      suggested_actions: ['Track my order', 'Talk to a person'],
      cards: [{ title: 'Winter sale', text: 'Boots at 30% off.', image_url: 'https://shop.example/boots.png', buttons: [{ label: 'Shop', url: 'https://shop.example/sale' }, { label: 'Tell me more', reply: 'Tell me more about the sale' }] }],
      charts: [{ type: 'bar', title: 'Orders', labels: ['Sep', 'Oct', 'Nov'], series: [{ name: 'orders', values: [3, 5, 2] }] }],
    });
    // The model was told why the invalid ones were refused.
    const toolOutputs = llm.requests.at(-1)!.body.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => m.content);
    expect(toolOutputs.filter((o: string) => o.includes('"error"'))).toEqual([expect.stringContaining('invalid show_card'), expect.stringContaining('invalid show_chart')]);
    // The history carries the same elements.
    const history = (await call(`history?conversation_id=${conv.conversation_id}`)).json();
    expect(history.messages.at(-1)).toMatchObject({ cards: res.json().cards, charts: res.json().charts, suggested_actions: res.json().suggested_actions });
    // The shop's agent has no reply_elements action: the model is not offered those tools.
    const plain = await init();
    await post('send', { conversation_id: plain.conversation_id, text: 'hi' });
    expect(tools()).not.toContain('show_card');
  });
});

describe('answers with tool calls (text of every round kept)', () => {
  test('an answer given with a tool call is the reply, on the socket, in the sync answer and in the history; a later round\'s text follows a paragraph apart', async () => {
    const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
    const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { name: 'Chips helper', actions: [{ type: 'reply_elements', kinds: ['suggested_actions'] }] });
    const chipsSite = await t.services.sites.create(ws, agentId, [ORIGIN]);
    const call = (url: string, payload?: object) =>
      t.app.inject({ method: payload ? 'POST' : 'GET', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': chipsSite.site_id, origin: ORIGIN }, payload });
    const conv = (await call('init', {})).json();

    // Sync: the first round's answer, with the chips its tool call made; the second round said nothing.
    const res = await call('send', { conversation_id: conv.conversation_id, text: 'when do you close?' });
    expect(res.json()).toEqual({ message_id: expect.stringMatching(/^msg_/), text: 'We close at 6 pm on weekdays.', suggested_actions: ['Opening hours on Saturday'] });

    // Async: the deltas of both rounds read as the final reply, the second round a paragraph after the first.
    const s = await frameCollector(`ws://${base}/api/chat/connect?site_id=${chipsSite.site_id}&conversation_id=${conv.conversation_id}`, ORIGIN);
    const sent = await call('send', { conversation_id: conv.conversation_id, text: 'when do you close on sunday?', delivery: 'async' });
    expect(sent.statusCode).toBe(202);
    const replyId = sent.json().reply_id;
    await s.until((f) => f.some((x) => x.type === 'reply' && x.reply_id === replyId));
    const final = s.frames.find((f) => f.type === 'reply' && f.reply_id === replyId)!;
    expect(final.text).toBe('We close at 6 pm on weekdays.\n\nAnything else I can help with?');
    const deltas = s.frames.filter((f) => f.type === 'reply_delta' && f.reply_id === replyId);
    expect(deltas.map((d) => d.text).join('')).toBe(final.text);
    s.close();

    // The history keeps both answers whole (and the model sees them in the next turn).
    const history = (await call(`history?conversation_id=${conv.conversation_id}`)).json();
    expect(history.messages.filter((m: { role: string }) => m.role === 'assistant').map((m: { text: string }) => m.text)).toEqual([
      'We close at 6 pm on weekdays.',
      'We close at 6 pm on weekdays.\n\nAnything else I can help with?',
    ]);
  });
});

describe('attachments from the agent (reply_elements kind attachments)', () => {
  test("the agent attaches a file of its knowledge base: a signed link in the answer, re-signed in the history; another file is refused", async () => {
    const kbAuth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
    const dispatcher = await startIndexDispatcher(tw);
    try {
      const form = await upload(t.app, kbAuth, { filename: 'returns-form.txt', content: 'Returns form. Name, order number, reason for the return, signature.' });
      expect(await indexed(tw, form.json().id)).toBe('active');
      const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
      const agentId = await publishedWebAgent(t.app, auth, ORIGIN, {
        name: 'Forms helper',
        knowledge_base: { file_ids: [form.json().id] },
        actions: [{ type: 'reply_elements', kinds: ['attachments'] }],
      });
      const formsSite = await t.services.sites.create(ws, agentId, [ORIGIN]);
      const call = (url: string, payload?: object) =>
        t.app.inject({ method: payload ? 'POST' : 'GET', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': formsSite.site_id, origin: ORIGIN }, payload });
      const conv = (await call('init', {})).json();
      const res = await call('send', { conversation_id: conv.conversation_id, text: 'can I have the returns form?' });
      expect(res.json()).toMatchObject({
        text: 'Here is the form.',
        attachments: [{ file_key: `kb/${form.json().id}`, file_name: 'returns-form.txt', mime_type: expect.stringContaining('text/plain'), url: expect.stringContaining('/api/media/') }],
      });
      const outputs = llm.requests.at(-1)!.body.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => JSON.parse(m.content));
      expect(outputs[0]).toEqual({ error: expect.stringContaining('is not a file of your knowledge base you may share') });
      // The link serves the file's bytes, never as active content.
      const media = await t.app.inject({ method: 'GET', url: new URL(res.json().attachments[0].url).pathname + new URL(res.json().attachments[0].url).search });
      expect(media.statusCode).toBe(200);
      expect(media.body).toContain('Returns form.');
      const history = (await call(`history?conversation_id=${conv.conversation_id}`)).json();
      expect(history.messages.at(-1).attachments).toEqual([{ file_key: `kb/${form.json().id}`, file_name: 'returns-form.txt', mime_type: expect.any(String), url: expect.stringContaining('/api/media/') }]);
    } finally {
      await dispatcher.stop();
    }
  });
});

describe('citations (issue 27 item 6)', () => {
  test('only the file the answer used is cited, by its real title, markers stripped; a file the agent may hand out links to its bytes, others are named only', async () => {
    // A workspace of its own: its files are not retrieved for the other tests' agents, which answer from their whole workspace.
    const bootsWs = await createWorkspace(db.orm, 'Boots');
    const kbAuth = bearer((await createKey(t.services, bootsWs, ['kb:read', 'kb:write'])).key);
    const dispatcher = await startIndexDispatcher(tw);
    try {
      const returns = await upload(t.app, kbAuth, {
        filename: 'boot-returns-v2.md',
        content: '# Boot returns and refunds\n\nUnworn boots can be sent back within 45 days of delivery for a full refund to the original card.\n',
      });
      const dispatch = await upload(t.app, kbAuth, {
        filename: 'dispatch.html',
        content: '<html><head><title>Dispatch &amp; delivery</title></head><body><p>Boots ship within three working days from our warehouse in Leeds, tracked to your door.</p></body></html>',
      });
      for (const f of [returns, dispatch]) {
        await indexed(tw, f.json().id);
        expect((await t.app.inject({ method: 'GET', url: `/api/v1/kb/files/${f.json().id}`, headers: kbAuth })).json()).toMatchObject({ status: 'active', error_message: null });
      }
      const [returnsId, dispatchId] = [returns.json().id as string, dispatch.json().id as string];
      const auth = bearer((await createKey(t.services, bootsWs, ['workflows:write', 'workflows:publish'])).key);
      // The agent selects both files: both may be handed out (POST /file_url would sign either).
      const linkedAgent = await publishedWebAgent(t.app, auth, ORIGIN, { name: 'Boots helper', knowledge_base: { file_ids: [returnsId, dispatchId] } });
      const linked = await t.services.sites.create(bootsWs, linkedAgent, [ORIGIN]);
      const call = (s: { site_id: string }, url: string, payload?: object) =>
        t.app.inject({ method: payload ? 'POST' : 'GET', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': s.site_id, origin: ORIGIN }, payload });
      const conv = (await call(linked, 'init', {})).json();
      const s = await frameCollector(`ws://${base}/api/chat/connect?site_id=${linked.site_id}&conversation_id=${conv.conversation_id}`, ORIGIN);
      let reply: { text: string; reply_id: string; citations?: Array<{ file_id: string; title: string; url?: string }> };
      try {
        expect((await call(linked, 'send', { conversation_id: conv.conversation_id, text: 'how long do I have to return my boots?', delivery: 'async' })).statusCode).toBe(202);
        await s.until((f) => f.some((x) => x.type === 'reply'));
        reply = s.frames.find((f) => f.type === 'reply') as typeof reply;
        // Streamed in 4-character deltas, the marker arrived cut up: none of it reached the visitor.
        const deltas = s.frames.filter((f) => f.type === 'reply_delta' && f.reply_id === reply.reply_id).map((f) => f.text).join('');
        expect(deltas).toBe('Unworn boots can be sent back within 45 days. Anything else?');
      } finally {
        s.close();
      }
      // Both files were retrieved and shown to the model, numbered; the answer used one.
      const system: string = llm.requests.at(-1)!.body.messages[0].content;
      expect(system).toMatch(/\[\d\] \(file: boot-returns-v2\.md, title: Boot returns and refunds\)\nBoot returns and refunds\nUnworn boots/);
      expect(system).toMatch(/\[\d\] \(file: dispatch\.html, title: Dispatch & delivery\)\nBoots ship/);
      expect(reply.text).toBe('Unworn boots can be sent back within 45 days. Anything else?');
      expect(reply.citations).toEqual([{ file_id: returnsId, title: 'Boot returns and refunds', url: expect.stringContaining('/api/media/') }]);
      const download = async (url: string) => t.app.inject({ method: 'GET', url: new URL(url).pathname + new URL(url).search });
      const bytes = await download(reply.citations![0].url!);
      expect(bytes.statusCode).toBe(200);
      expect(bytes.body).toContain('Unworn boots can be sent back within 45 days');
      // No marker: the answer repeats a run of the other file's words, so that file alone is cited, under its page's <title>.
      const shipped = (await call(linked, 'send', { conversation_id: conv.conversation_id, text: 'when will my boots ship?' })).json();
      expect(shipped.text).toBe('Good news: boots ship within three working days from Leeds.');
      expect(shipped.citations).toEqual([{ file_id: dispatchId, title: 'Dispatch & delivery', url: expect.stringContaining('/api/media/') }]);
      // The stored text is clean; the history signs the links afresh, and they still download.
      const history = (await call(linked, `history?conversation_id=${conv.conversation_id}`)).json();
      const answers = history.messages.filter((m: { role: string }) => m.role === 'assistant');
      expect(answers.map((m: { text: string }) => m.text)).toEqual(['Unworn boots can be sent back within 45 days. Anything else?', 'Good news: boots ship within three working days from Leeds.']);
      expect(answers.map((m: { citations: unknown }) => m.citations)).toEqual([
        [{ file_id: returnsId, title: 'Boot returns and refunds', url: expect.stringContaining('/api/media/') }],
        [{ file_id: dispatchId, title: 'Dispatch & delivery', url: expect.stringContaining('/api/media/') }],
      ]);
      expect((await download(answers[1].citations[0].url)).body).toContain('Boots ship within three working days');
      // A stored link that has gone stale is never shown: the history signs one afresh.
      await db.orm.em.fork().execute(`update chat_messages set extras = jsonb_set(extras, '{citations,0,url}', '"https://stale.example/x"') where id = ?`, [reply.reply_id]);
      const again = (await call(linked, `history?conversation_id=${conv.conversation_id}`)).json();
      const resigned = again.messages.find((m: { id: string }) => m.id === reply.reply_id).citations[0].url;
      expect(resigned).toContain('/api/media/');
      expect((await download(resigned)).body).toContain('Unworn boots');
      // Taken out of the agent's selection, the file is named in the history, no longer handed out.
      expect((await t.app.inject({ method: 'PATCH', url: `/api/v1/agents/${linkedAgent}`, headers: auth, payload: { knowledge_base: { file_ids: [dispatchId] } } })).statusCode).toBe(200);
      expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${linkedAgent}/publish`, headers: auth })).statusCode).toBe(200);
      const withdrawn = (await call(linked, `history?conversation_id=${conv.conversation_id}`)).json();
      expect(withdrawn.messages.find((m: { id: string }) => m.id === reply.reply_id).citations).toEqual([{ file_id: returnsId, title: 'Boot returns and refunds' }]);
      expect(withdrawn.messages.filter((m: { role: string }) => m.role === 'assistant')[1].citations[0].url).toContain('/api/media/');

      // An agent answering from the whole workspace selects nothing it may hand out: the file is named, never linked.
      const unlinked = await t.services.sites.create(bootsWs, await publishedWebAgent(t.app, auth, ORIGIN, { name: 'Whole workspace helper' }), [ORIGIN]);
      const other = (await call(unlinked, 'init', {})).json();
      const named = (await call(unlinked, 'send', { conversation_id: other.conversation_id, text: 'how long do I have to return my boots?' })).json();
      expect(named.text).toBe('Unworn boots can be sent back within 45 days. Anything else?');
      expect(named.citations).toEqual([{ file_id: returnsId, title: 'Boot returns and refunds' }]);
      // A reply that used no passage cites nothing, though passages were retrieved for it.
      const echo = (await call(unlinked, 'send', { conversation_id: other.conversation_id, text: 'do you sell boots for returns in winter?' })).json();
      expect(llm.requests.at(-1)!.body.messages[0].content).toContain('Unworn boots');
      expect(echo.text).toBe('Echo: do you sell boots for returns in winter?');
      expect(echo).not.toHaveProperty('citations');
    } finally {
      await dispatcher.stop();
    }
  });
});

describe('rich replies', () => {
  test('a reply with structure carries rich blocks, validated (a ragged table fitted to its header), in the answer and the history; a plain one none', async () => {
    const conv = await init();
    const res = await post('send', { conversation_id: conv.conversation_id, text: 'the hours as a table please' });
    expect(res.json().rich).toEqual([
      { type: 'paragraph', spans: [{ text: 'Our hours:' }] },
      { type: 'table', header: ['Day', 'Hours'], rows: [['Mon–Fri', '9–18'], ['Sat', '']] },
    ]);
    const history = (await t.app.inject({ method: 'GET', url: `/api/public/widget/history?conversation_id=${conv.conversation_id}`, headers: { 'x-concierge-site': site.site_id, origin: ORIGIN } })).json();
    expect(history.messages.at(-1).rich).toEqual(res.json().rich);
    const plain = await post('send', { conversation_id: conv.conversation_id, text: 'hello' });
    expect(plain.json().rich).toBeUndefined();
  });
});

describe('page commands (site setting ui_commands)', () => {
  test('off by default; a site that lists commands lets the agent send only those, with validated arguments, as ui:command frames', async () => {
    const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
    const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { name: 'Page helper' });
    const pageSite = await t.services.sites.create(ws, agentId, [ORIGIN]);
    const call = (url: string, payload?: object) =>
      t.app.inject({ method: payload ? 'POST' : 'GET', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': pageSite.site_id, origin: ORIGIN }, payload });
    const tools = () => (llm.requests.at(-1)!.body.tools ?? []).map((x: { function: { name: string } }) => x.function.name);

    // Off: the model is not offered the tool.
    const off = (await call('init', {})).json();
    await call('send', { conversation_id: off.conversation_id, text: 'hello' });
    expect(tools()).not.toContain('page_command');

    // Bad lists are refused; a good one turns them on.
    await expect(answerOf(t.services.sites.setPageCommands(pageSite.site_id, ['Navigate!']))).resolves.toMatchObject({ status: 400, code: 'invalid_request' });
    expect(await t.services.sites.setPageCommands(pageSite.site_id, ['navigate', 'open_checkout', 'navigate'])).toEqual({ site_id: pageSite.site_id, ui_commands: ['navigate', 'open_checkout'] });
    const conv = (await call('init', {})).json();
    const socket = await frameCollector(`ws://${base}/api/chat/connect?site_id=${pageSite.site_id}&conversation_id=${conv.conversation_id}`, ORIGIN);
    try {
      const res = await call('send', { conversation_id: conv.conversation_id, text: 'show me my orders', delivery: 'async' });
      expect(res.statusCode).toBe(202);
      await socket.until((f) => f.some((x) => x.type === 'reply'));
      const commands = socket.frames.filter((f) => f.type === 'ui:command');
      expect(commands).toEqual([{ type: 'ui:command', command: 'navigate', args: { url: '/orders' } }]);
      // The offered tool names only the site's commands; the refusals told the model why.
      const offered = llm.requests.at(-1)!.body.tools.find((x: { function: { name: string } }) => x.function.name === 'page_command');
      expect(offered.function.parameters.properties.command.enum).toEqual(['navigate', 'open_checkout']);
      const outputs = llm.requests.at(-1)!.body.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => JSON.parse(m.content));
      expect(outputs).toEqual([
        { error: 'command: must be one of navigate, open_checkout' },
        { error: expect.stringContaining('args.url: an https URL or a path starting with /') },
        { error: expect.stringContaining('args') },
        { ok: true, sent: { command: 'navigate', args: { url: '/orders' } } },
      ]);
      expect(socket.frames.find((f) => f.type === 'reply')).toMatchObject({ text: 'I opened your orders page.' });
    } finally {
      socket.close();
    }
    // Turned off again: no tool.
    await t.services.sites.setPageCommands(pageSite.site_id, ['']);
    await call('send', { conversation_id: conv.conversation_id, text: 'hello again' });
    expect(tools()).not.toContain('page_command');
  });
});

describe('masking personal details (agent setting privacy.mask_personal_details)', () => {
  test('the final reply and the stored transcript are masked; deltas may have shown the details; off by default', async () => {
    const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
    const masking = await publishedWebAgent(t.app, auth, ORIGIN, { name: 'Masking helper', privacy: { mask_personal_details: true } });
    const maskedSite = await t.services.sites.create(ws, masking, [ORIGIN]);
    const call = (s: { site_id: string }, url: string, payload?: object) =>
      t.app.inject({ method: payload ? 'POST' : 'GET', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': s.site_id, origin: ORIGIN }, payload });
    const conv = (await call(maskedSite, 'init', {})).json();
    const res = await call(maskedSite, 'send', { conversation_id: conv.conversation_id, text: 'which card on file do you have?' });
    expect(res.json().text).toBe('The card on file is •••• 1111; receipts go to [email address hidden].');
    const history = (await call(maskedSite, `history?conversation_id=${conv.conversation_id}`)).json();
    expect(history.messages.at(-1).text).toBe('The card on file is •••• 1111; receipts go to [email address hidden].');
    expect(JSON.stringify(history)).not.toContain('4111 1111 1111 1111');
    // The shop's agent has no such setting: its replies are left as the model wrote them.
    const plain = await init();
    const unmasked = await post('send', { conversation_id: plain.conversation_id, text: 'which card on file do you have?' });
    expect(unmasked.json().text).toContain('4111 1111 1111 1111');
  });
});

describe('without a language model', () => {
  test('a greeting, an answered question, an unanswerable one, a request for a person: replies that read like help, never invented text', async () => {
    const kbAuth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
    const dispatcher = await startIndexDispatcher(tw);
    const noLlm = await startTestWorker(db);
    const app = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: noLlm.client, taskQueue: noLlm.taskQueue } });
    try {
      const files = [
        await upload(t.app, kbAuth, {
          filename: 'returns-policy.txt',
          content: 'Unworn shoes can be returned within 30 days of delivery for a full refund to the original card. Worn shoes cannot be returned.',
        }),
        await upload(t.app, kbAuth, { filename: 'shoe-care.txt', content: 'Clean leather shoes with a damp cloth. Unworn shoes keep their shape in the box they were delivered in.' }),
      ];
      for (const f of files) expect(await indexed(tw, f.json().id)).toBe('active');
      const call = (url: string, payload: object) => app.app.inject({ method: 'POST', url: `/api/public/widget/${url}`, headers: headers(), payload });
      const conv = (await call('init', {})).json();
      const s = await socket(conv.conversation_id);
      const say = async (text: string) => {
        const res = await call('send', { conversation_id: conv.conversation_id, text });
        expect(res.statusCode).toBe(200);
        return res.json() as { text: string; suggested_actions?: string[]; citations?: unknown };
      };
      expect((await say('hello')).text).toMatch(/^Hello! Ask me anything/);
      const answered = await say('can I return unworn shoes for a refund?');
      expect(answered.text).toBe(
        'From our help articles:\n\n**Returns policy**\n\nUnworn shoes can be returned within 30 days of delivery for a full refund to the original card. Worn shoes cannot be returned.',
      );
      expect(answered.text).not.toMatch(/^>|\.txt|language model|knowledge base/m);
      // The quoted article is cited by its title, never its file name; the history carries the same.
      expect(answered.citations).toEqual([{ file_id: files[0].json().id, title: 'Returns policy' }]);
      const page = (await app.app.inject({ method: 'GET', url: `/api/public/widget/history?conversation_id=${conv.conversation_id}`, headers: headers() })).json();
      expect(page.messages.at(-1).citations).toEqual(answered.citations);
      // The other article that covers the question is offered as a suggested action; the quoted one is cited.
      expect(answered.suggested_actions).toEqual(['Shoe care']);
      // On the socket: the reply with its chips, then the chips as their own frame.
      await s.until((f) => f.some((x) => x.type === 'suggested_actions'));
      const [reply, chips] = s.frames.filter((x) => x.type === 'reply' || x.type === 'suggested_actions').slice(-2);
      expect(reply).toMatchObject({ type: 'reply', suggested_actions: ['Shoe care'] });
      expect(chips).toEqual({ type: 'suggested_actions', reply_id: reply.reply_id, suggested_actions: ['Shoe care'] });
      s.close();
      const nothing = await say('do you repair bicycles?');
      expect(nothing.text).toBe("I couldn't find that in our help articles. If you would like to talk to a person, just say so.");
      // Asking for a person hands the conversation over (the agent has handoff); the agent is then silent.
      expect((await say('I want to talk to a person')).text).toBe('A colleague will take it from here.');
      expect((await say('hello?')).text).toBe('');
      const cases = (await t.app.inject({ method: 'GET', url: '/api/v1/cases', headers: bearer((await createKey(t.services, ws, ['conversations:read'])).key) })).json();
      expect(cases.cases.map((c: { id: string }) => c.id)).toContain(conv.conversation_id);
    } finally {
      await app.close();
      await noLlm.close();
      await dispatcher.stop();
    }
  });
});
