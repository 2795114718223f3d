import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, type TestApp } from '../support/app';
import { asBrowser, CONSOLE_ORIGIN, handoffReply, signedInUser, type Browser } from '../support/console';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { frameCollector } from '../support/socket';
import { upload } from '../support/kb';
import { historySummaries, maybeRecordHistory, startTestWorker } from '../support/temporal';
import { conversationWorkflowId } from '../../workflows/conversation';
import { CloudApiProvider } from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { closeWindow, inboundDone, publishedMsgappAgent, startInboundDispatcher } from '../support/msgapp';
import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';

/**
 * The console's inbox (issue 31) on the real app, a real database and Temporal: the list's filters and search, a
 * person's actions through the conversation's workflow (take over, reply, note, hand back, close), the take-over race,
 * the queue (order, capacity, round robin, re-queue when a person goes offline), the times recorded, roles and
 * workspaces, and the live stream.
 */
let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let wsA: string;
let wsB: string;
let port: number;
let auth: Record<string, string>;
let site: { site_id: string; site_secret: string };
let ownerA: Browser;
let agentA: Browser;
let agent2A: Browser;
let viewerA: Browser;
let agentB: Browser;
let sandbox: MsgappSandbox;
let relay: OutboxDispatcher;
const NUMBER = { id: '4440004', display: '+15550400004' };
const APP_SECRET = 'app-secret';
const ORIGIN = 'https://shop.example';
const GRACE_MS = 2_000;

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
    config: { PUBLIC_BASE_URL: CONSOLE_ORIGIN, INBOX_HEARTBEAT_MS: 150, INBOX_OFFLINE_GRACE_MS: GRACE_MS },
    serviceOptions: { publicBaseUrl: CONSOLE_ORIGIN, msgapp },
    msgappWebhook: { appSecret: APP_SECRET, verifyToken: 'verify-me' },
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
  sandbox.setWebhookUrl(`http://127.0.0.1:${port}/webhooks/msgapp`);
  wsA = await createWorkspace(db.orm, 'Workspace A');
  wsB = await createWorkspace(db.orm, 'Workspace B');
  [ownerA, agentA, agent2A, viewerA, agentB] = await Promise.all([
    signedInUser(t.app, t.services, wsA, 'owner'),
    signedInUser(t.app, t.services, wsA, 'agent', 'alex@example.com'),
    signedInUser(t.app, t.services, wsA, 'agent', 'blake@example.com'),
    signedInUser(t.app, t.services, wsA, 'viewer'),
    signedInUser(t.app, t.services, wsB, 'agent'),
  ]);
  auth = bearer((await createKey(t.services, wsA, ['workflows:write', 'workflows:publish', 'conversations:read', 'conversations:write'])).key);
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
const newVisitor = async () => ((await widget('POST', 'init', {})).json() as { conversation_id: string }).conversation_id;
const as = (b: Browser) => ({
  get: (url: string) => t.app.inject({ method: 'GET', url, headers: asBrowser(b) }),
  post: (url: string, payload?: object) => t.app.inject({ method: 'POST', url, headers: asBrowser(b), ...(payload ? { payload } : {}) }),
  put: (url: string, payload: object) => t.app.inject({ method: 'PUT', url, headers: asBrowser(b), payload }),
});
const act = (b: Browser, id: string, action: object) => as(b).post(`/api/console/inbox/conversations/${id}/actions`, action);
const list = async (b: Browser, query: string) => ((await as(b).get(`/api/console/inbox/conversations?${query}`)).json() as { conversations: Array<{ id: string }> }).conversations.map((c) => c.id);
const events = async (id: string) => ((await t.app.inject({ method: 'GET', url: `/api/v1/conversations/${id}/events?limit=100`, headers: auth })).json() as { events: Array<{ type: string; data: Record<string, unknown> }> }).events;
/** A visitor who asked for a person: the agent's handoff tool flags the conversation. */
async function handedOff(text = 'I want a person'): Promise<string> {
  const id = await newVisitor();
  expect((await widget('POST', 'send', { conversation_id: id, text })).json().text).toBe('A colleague will take it from here.');
  return id;
}

async function until(pred: () => Promise<boolean> | boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The inbox's live stream as a browser holds it (the session cookie), its events parsed. */
function stream(b: Browser): Promise<{ events: Array<{ event: string; data: Record<string, unknown> }>; ended: () => boolean; close: () => void }> {
  return new Promise((resolve, reject) => {
    const events: Array<{ event: string; data: Record<string, unknown> }> = [];
    let ended = false;
    const req = http.get({ host: '127.0.0.1', port, path: '/api/console/inbox/stream', headers: { cookie: `concierge_session=${b.cookie}` } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`));
      expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        let at: number;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          const event = /^event: (.+)$/m.exec(block)?.[1];
          const data = /^data: (.+)$/m.exec(block)?.[1];
          if (event && data) events.push({ event, data: JSON.parse(data) });
        }
      });
      res.on('end', () => (ended = true));
      res.on('close', () => (ended = true));
      resolve({ events, ended: () => ended, close: () => req.destroy() });
    });
    req.on('error', (err) => (ended ? undefined : reject(err)));
  });
}

describe('the inbox', () => {
  test('the live stream: a visitor asking for a person reaches an open inbox at once (waiting), and the stream ends at sign-out', async () => {
    const s = await stream(viewerA);
    await until(() => s.events.some((e) => e.event === 'ready'), 'ready');
    const id = await handedOff();
    await until(() => s.events.some((e) => e.event === 'conversation' && e.data.conversation_id === id && e.data.change === 'handoff' && e.data.waiting === true), 'the hand-off event');
    // Another workspace's stream hears nothing of it.
    const other = await stream(agentB);
    await until(() => other.events.some((e) => e.event === 'ready'), 'ready');
    await widget('POST', 'send', { conversation_id: id, text: 'hello?' });
    await until(() => s.events.some((e) => e.data.conversation_id === id && e.data.change === 'activity'), 'the new message');
    expect(other.events.filter((e) => e.event === 'conversation')).toEqual([]);
    other.close();
    // Sign-out ends the stream (checked on the next heartbeat).
    expect((await as(viewerA).post('/api/console/sign-out')).statusCode).toBe(204);
    await until(() => s.ended(), 'the stream to end at sign-out', 5_000);
    viewerA = await signedInUser(t.app, t.services, wsA, 'viewer');
  }, 30_000);

  test('two takes at once: exactly one 200 and one 409 already_assigned; the visitor is told a person joined; the history names who acted', async () => {
    const id = await handedOff();
    const socket = await frameCollector(`ws://127.0.0.1:${port}/api/chat/connect?site_id=${site.site_id}&conversation_id=${id}`, ORIGIN);
    const [a, b] = await Promise.all([act(agentA, id, { kind: 'take' }), act(agent2A, id, { kind: 'take' })]);
    expect([a.statusCode, b.statusCode].sort()).toEqual([200, 409]);
    const loser = a.statusCode === 409 ? a : b;
    expect(loser.json()).toEqual({ error: 'already_assigned', message: expect.any(String) });
    const winner = a.statusCode === 200 ? agentA : agent2A;
    const detail = (await as(ownerA).get(`/api/console/inbox/conversations/${id}`)).json();
    expect(detail.conversation).toMatchObject({ id, needs_human: true, assignee: { id: winner.userId, email: winner.email } });
    await socket.until((f) => f.some((x) => x.type === 'reply' && x.unsolicited === true));
    expect(socket.frames.find((x) => x.type === 'reply')).toMatchObject({ author: 'human', unsolicited: true, text: `${winner.email.split('@')[0]} joined the conversation.` });
    socket.close();
    expect(await historySummaries(tw.client, conversationWorkflowId(id))).toEqual(expect.arrayContaining([`take by ${winner.email}`]));
    const assigned = (await events(id)).filter((e) => e.type === 'inbox.assigned');
    expect(assigned).toEqual([expect.objectContaining({ data: expect.objectContaining({ assignee_id: winner.userId, how: 'take', wait_ms: expect.any(Number) }) })]);
  }, 30_000);

  test('reply reaches the widget with the human author; a note stays the team\'s; hand back lets the agent answer the next message; times recorded', async () => {
    const id = await handedOff();
    expect((await act(agentA, id, { kind: 'take' })).statusCode).toBe(200);
    const socket = await frameCollector(`ws://127.0.0.1:${port}/api/chat/connect?site_id=${site.site_id}&conversation_id=${id}`, ORIGIN);
    // A knowledge-base file of the workspace goes with the reply (made active here: indexing is not what this checks).
    const kbAuth = bearer((await createKey(t.services, wsA, ['kb:read', 'kb:write'])).key);
    const file = (await upload(t.app, kbAuth, { filename: 'returns-policy.md', content: 'Returns are free within 30 days.' })).json() as { id: string };
    await db.orm.em.fork().execute(`update kb_files set status = 'active' where id = ?`, [file.id]);
    expect((await act(agentA, id, { kind: 'reply', text: 'See this', attachments: ['file_000000000000000000000000'] })).json().error).toBe('not_found');
    const replied = await act(agentA, id, { kind: 'reply', text: 'Hi, Alex here. Let me look.', attachments: [file.id] });
    expect(replied.statusCode).toBe(200);
    await socket.until((f) => f.some((x) => x.type === 'reply' && x.text === 'Hi, Alex here. Let me look.'));
    expect(socket.frames.find((x) => x.text === 'Hi, Alex here. Let me look.')).toMatchObject({
      reply_id: replied.json().message_id,
      author: 'human',
      author_name: 'alex',
      unsolicited: true,
      attachments: [{ file_key: `kb/${file.id}`, file_name: 'returns-policy.md', mime_type: expect.any(String), url: expect.stringContaining('/') }],
    });
    expect((await act(agentA, id, { kind: 'note', text: 'Customer is upset about the parcel' })).statusCode).toBe(200);
    const history = (await widget('GET', `history?conversation_id=${id}`)).json();
    expect(history.messages.at(-1)).toMatchObject({ text: 'Hi, Alex here. Let me look.', role: 'assistant', author: 'human', attachments: [expect.objectContaining({ file_name: 'returns-policy.md', url: expect.any(String) })] });
    expect(JSON.stringify(history)).not.toContain('upset');
    expect(JSON.stringify(await events(id))).not.toContain('upset');
    const detail = (await as(agentA).get(`/api/console/inbox/conversations/${id}`)).json();
    expect(detail.notes).toEqual([expect.objectContaining({ text: 'Customer is upset about the parcel', author: { id: agentA.userId, email: agentA.email } })]);
    expect(detail.messages.map((m: { text: string }) => m.text)).toEqual(expect.arrayContaining(['I want a person', 'Hi, Alex here. Let me look.']));
    // While a person holds it the agent stays silent; handed back, it answers the next message.
    expect((await widget('POST', 'send', { conversation_id: id, text: 'ok' })).json().text).toBe('');
    expect((await act(agentA, id, { kind: 'hand_back' })).statusCode).toBe(200);
    await socket.until((f) => f.some((x) => x.type === 'handoff' && x.active === false));
    expect((await widget('POST', 'send', { conversation_id: id, text: 'thanks' })).json().text).toBe('Echo: thanks');
    expect((await act(agentA, id, { kind: 'hand_back' })).json().error).toBe('not_handed_off');
    socket.close();
    const timeline = await events(id);
    expect(timeline.find((e) => e.type === 'inbox.assigned')?.data).toMatchObject({ wait_ms: expect.any(Number) });
    expect(timeline.find((e) => e.type === 'inbox.handed_back')?.data).toMatchObject({ by: agentA.userId, handle_ms: expect.any(Number) });
    // Closed with a reason: recorded; nothing more can be done in it.
    expect((await act(agentA, id, { kind: 'close', reason: 'resolved' })).statusCode).toBe(200);
    expect((await events(id)).find((e) => e.type === 'inbox.closed')?.data).toMatchObject({ reason: 'resolved', by: agentA.userId });
    // Closed, the actor ends; its history (turns and every person's action) is a replay fixture.
    await tw.client.workflow.getHandle(conversationWorkflowId(id)).result();
    await maybeRecordHistory(tw.client, conversationWorkflowId(id), 'conversation-operator-actions');
    expect((await act(agentA, id, { kind: 'reply', text: 'late' })).json()).toMatchObject({ error: 'conversation_closed' });
    expect(await list(agentA, 'status=closed')).toContain(id);
  }, 40_000);

  test('filters and search: status (open, needs a person, mine, the queue, closed), channel, agent, site, words in transcripts', async () => {
    const plain = await newVisitor();
    await widget('POST', 'send', { conversation_id: plain, text: 'Where is my zeppelin order?' });
    const waiting = await handedOff('I want a person about my umbrella');
    const mine = await handedOff();
    expect((await act(agent2A, mine, { kind: 'take' })).statusCode).toBe(200);
    expect(await list(agentA, 'q=zeppelin')).toEqual([plain]);
    expect(await list(agentA, 'q=umbrella')).toEqual([waiting]);
    const open = await list(agentA, 'status=open&limit=100');
    expect(open.slice(0, 3)).toEqual([mine, waiting, plain]);
    expect(await list(agentA, 'status=needs_human&limit=100')).toEqual(expect.arrayContaining([waiting, mine]));
    expect(await list(agentA, 'status=needs_human&limit=100')).not.toContain(plain);
    expect(await list(agent2A, 'status=mine')).toContain(mine);
    expect(await list(agentA, 'status=mine')).not.toContain(mine);
    const queue = await list(agentA, 'status=unassigned&limit=100');
    expect(queue).toContain(waiting);
    expect(queue).not.toContain(mine);
    expect(await list(agentA, `status=open&channel=msgapp`)).toEqual([]);
    expect(await list(agentA, `status=open&site_id=${site.site_id}&limit=100`)).toEqual(expect.arrayContaining([plain, waiting, mine]));
    const agentId = (await as(agentA).get(`/api/console/inbox/conversations/${plain}`)).json().conversation.agent.id;
    expect(await list(agentA, `status=open&agent_id=${agentId}&limit=100`)).toEqual(expect.arrayContaining([plain]));
    expect(await list(agentA, `status=open&agent_id=agt_000000000000000000000000`)).toEqual([]);
    // A widget opened and left (nobody wrote) is no conversation to work.
    const empty = await newVisitor();
    expect(await list(agentA, 'status=all&limit=100')).not.toContain(empty);
  }, 30_000);

  test('roles and workspaces: a viewer reads but may not act (403); another workspace sees nothing (404)', async () => {
    const id = await handedOff();
    expect((await as(viewerA).get('/api/console/inbox/conversations')).statusCode).toBe(200);
    expect((await as(viewerA).get(`/api/console/inbox/conversations/${id}`)).statusCode).toBe(200);
    for (const action of [{ kind: 'take' }, { kind: 'reply', text: 'hi' }, { kind: 'note', text: 'x' }, { kind: 'close', reason: 'x' }]) {
      const res = await act(viewerA, id, action);
      expect([res.statusCode, res.json().error]).toEqual([403, 'forbidden']);
    }
    expect((await as(agentB).get(`/api/console/inbox/conversations/${id}`)).statusCode).toBe(404);
    expect((await act(agentB, id, { kind: 'take' })).json()).toMatchObject({ error: 'not_found' });
    expect(await list(agentB, 'status=all')).not.toContain(id);
    expect((await as(agentA).post('/api/console/inbox/canned-replies', { title: 'Hi', text: 'Hi {{customer.name}}' })).statusCode).toBe(403);
    // Canned replies are the workspace's: an owner or admin adds them, everyone working the inbox reads them.
    expect((await as(ownerA).post('/api/console/inbox/canned-replies', { title: 'Greeting', text: 'Hi {{customer.name}}, {{agent.name}} here.' })).statusCode).toBe(201);
    expect((await as(ownerA).post('/api/console/inbox/canned-replies', { title: 'greeting', text: 'again' })).json().error).toBe('canned_reply_exists');
    expect((await as(agentA).get('/api/console/inbox/canned-replies')).json().canned_replies).toEqual([expect.objectContaining({ title: 'Greeting' })]);
    expect((await as(agentB).get('/api/console/inbox/canned-replies')).json().canned_replies).toEqual([]);
  }, 30_000);

  test('a conversation whose workflow never started (nobody wrote yet) is taken by starting it', async () => {
    const fresh = await newVisitor();
    expect((await act(agentA, fresh, { kind: 'take' })).statusCode).toBe(200);
    expect(await historySummaries(tw.client, conversationWorkflowId(fresh))).toEqual(expect.arrayContaining([`take by ${agentA.email}`]));
    expect((await as(agentA).get(`/api/console/inbox/conversations/${fresh}`)).json().conversation).toMatchObject({ needs_human: true, assignee: { id: agentA.userId } });
  }, 30_000);

  test('msgapp: a person replies inside the 24-hour window; outside it a text is 422 session_window_closed and an approved template goes', async () => {
    await publishedMsgappAgent(t, auth, wsA, NUMBER);
    const customer = '+15557002002';
    const sent = await sandbox.injectInbound({ from: customer, to: NUMBER.id, text: 'I want a person', profileName: 'Robin' });
    expect(sent.webhookStatus).toBe(200);
    const done = await inboundDone(tw, sent.providerMessageId);
    if (done.status !== 'recorded') throw new Error(`inbound ${done.status}`);
    const [{ conversation_id: id }] = await db.orm.em.fork().execute<Array<{ conversation_id: string }>>('select conversation_id from messages where id = ?', [done.messageId]);
    expect(await list(agentA, 'status=needs_human&channel=msgapp')).toEqual([id]);
    const before = (await as(agentA).get(`/api/console/inbox/conversations/${id}`)).json();
    expect(before.reply).toMatchObject({ channel: 'msgapp', can_reply: true, window_open: true, templates: [{ name: 'order_update', language: 'en', body: 'Your order {{1}} is on its way.' }] });

    const texts = () => sandbox.sent.filter((m) => m.body.to === customer).map((m) => m.body);
    expect((await act(agentA, id, { kind: 'reply', text: 'Hi Robin, Alex here.' })).statusCode).toBe(200);
    expect(texts()).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'text', text: expect.objectContaining({ body: 'Hi Robin, Alex here.' }) })]));
    await until(async () => (await as(agentA).get(`/api/console/inbox/conversations/${id}`)).json().messages.some((m: { text: string; author?: string }) => m.text === 'Hi Robin, Alex here.'), 'the reply in the transcript');

    // A day later: the window has closed.
    await closeWindow(db.orm, id);
    expect((await as(agentA).get(`/api/console/inbox/conversations/${id}`)).json().reply).toMatchObject({ window_open: false });
    const late = await act(agentA, id, { kind: 'reply', text: 'Are you there?' });
    expect([late.statusCode, late.json().error]).toEqual([422, 'session_window_closed']);
    expect((await act(agentA, id, { kind: 'reply', template: { name: 'order_update', language: 'en', variables: ['A-1'] } })).statusCode).toBe(200);
    expect(texts()).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'template', template: expect.objectContaining({ name: 'order_update' }) })]));
    expect((await act(agentA, id, { kind: 'reply', template: { name: 'not_there' } })).json().error).toBe('template_not_approved');
  }, 40_000);

  test('the queue: longest waiting first; round robin over people with the inbox open, within capacity; re-queued when one goes offline', async () => {
    // Nobody works this workspace's queue but the two people below: earlier tests' holders stay as they are.
    const [c1, c2, c3] = [await handedOff(), await handedOff(), await handedOff()];
    const queue = await list(ownerA, 'status=unassigned&limit=100');
    expect(queue.filter((id) => [c1, c2, c3].includes(id))).toEqual([c1, c2, c3]);
    const [p1, p2] = await Promise.all([signedInUser(t.app, t.services, wsA, 'agent', 'pat@example.com'), signedInUser(t.app, t.services, wsA, 'agent', 'quinn@example.com')]);
    for (const p of [p1, p2]) expect((await as(p).put('/api/console/inbox/me', { capacity: 1 })).statusCode).toBe(200);
    const [s1, s2] = [await stream(p1), await stream(p2)];
    await until(async () => ((await as(ownerA).get('/api/console/inbox/team')).json().team as Array<{ id: string; available: boolean }>).filter((m) => [p1.userId, p2.userId].includes(m.id) && m.available).length === 2, 'both present');
    // Everyone else in the workspace is offline (never opened the inbox): the queue's older entries stay for them.
    expect((await as(ownerA).put('/api/console/inbox/settings', { auto_assign: true })).statusCode).toBe(200);
    const holder = async (id: string) => ((await as(ownerA).get(`/api/console/inbox/conversations/${id}`)).json().conversation.assignee?.id ?? null) as string | null;
    await until(async () => (await list(p1, 'status=mine')).length === 1 && (await list(p2, 'status=mine')).length === 1, 'one each');
    // Capacity 1 each: the oldest two went, one to each (round robin); the rest waits.
    const held = [...(await list(p1, 'status=mine')), ...(await list(p2, 'status=mine'))];
    expect(held).toHaveLength(2);
    expect(new Set(held).size).toBe(2);
    expect(await holder(c3)).toBe(null);
    const p2Holds = (await list(p2, 'status=mine'))[0];
    expect((await events(p2Holds)).find((e) => e.type === 'inbox.assigned')?.data).toMatchObject({ how: 'round_robin', assignee_id: p2.userId, wait_ms: expect.any(Number) });
    // p2 closes the inbox: after the grace period what they held goes back to the queue, in its place.
    s2.close();
    await until(async () => (await holder(p2Holds)) === null, 're-queued', 15_000);
    expect((await events(p2Holds)).find((e) => e.type === 'inbox.requeued')?.data).toMatchObject({ assignee_id: p2.userId, reason: 'offline', handle_ms: expect.any(Number) });
    // The queue's own actions went through the conversation's workflow too, as the system's.
    expect(await historySummaries(tw.client, conversationWorkflowId(p2Holds))).toEqual(expect.arrayContaining(['assign by system', 'requeue by system']));
    expect(await list(ownerA, 'status=unassigned&limit=100')).toContain(p2Holds);
    // p1 is full (capacity 1): nothing more for them until they set a higher capacity.
    expect(await list(p1, 'status=mine')).toHaveLength(1);
    expect((await as(p1).put('/api/console/inbox/me', { capacity: 2 })).statusCode).toBe(200);
    await until(async () => (await list(p1, 'status=mine')).length === 2, 'a second one for p1');
    s1.close();
    expect((await as(ownerA).put('/api/console/inbox/settings', { auto_assign: false })).statusCode).toBe(200);
  }, 40_000);
});
