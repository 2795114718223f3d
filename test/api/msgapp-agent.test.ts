import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { CloudApiProvider, signHubPayload } from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { agentReplyId } from '../../app/temporal-clients/conversations';
import { conversationWorkflowId, REPLY_SEND_ACTIVITY_PATCH } from '../../workflows/conversation';
import { messageSendWorkflowId } from '../../workflows/message-send';
import { transcriberFromConfig } from '../../app/extractor';
import { LocalWhisperTranscriber } from '../../providers/speech/whisper';
import { msgappInboundWorkflowId } from '../../workflows/msgapp-inbound';
import { bearer, createKey, createWorkspace, MODELS_DIR, startTestApp, testConfig, type TestApp } from '../support/app';
import { speak, wordErrorRate } from '../../dev/fakes/speech';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { closeInOrder } from '../support/teardown';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { inboundDone, startInboundDispatcher } from '../support/msgapp';
import { historySteps, maybeRecordHistory, startTestWorker, workflowResult, type TestWorker } from '../support/temporal';
import type { OutboxDispatcher } from '../../worker/outbox-dispatcher';

/**
 * The agent answers on msgapp: a customer's message (the sandbox provider POSTs it to our
 * webhook) goes to the conversation's actor, the same workflow type as web chat; the
 * agent's reply (a fake OpenAI-compatible model) leaves through the message-send
 * workflow to the sandbox, once, and its delivery statuses come back as for any send.
 * Humans take over (handoff), write through POST /api/v1/messages, and hand back.
 */
let db: TestDatabase;
let sandbox: MsgappSandbox;
let llm: FakeLlm;
let t: TestApp;
let tw: TestWorker;
let relay: OutboxDispatcher;
let ws: string;
let auth: Record<string, string>;

const APP_SECRET = 'app-secret';
const NUMBER = { id: '4440004', display: '+15550400004' };
const SILENT_NUMBER = { id: '5550005', display: '+15550500005' };

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startMsgappSandbox({
    appSecret: APP_SECRET,
    statusDelaysMs: { delivered: 50, read: 100 },
    numbers: [
      { phoneNumberId: NUMBER.id, displayPhoneNumber: NUMBER.display, accessToken: 'token-1' },
      { phoneNumberId: SILENT_NUMBER.id, displayPhoneNumber: SILENT_NUMBER.display, accessToken: 'token-1' },
    ],
  });
  llm = await startFakeLlm({
    reply: (body) => {
      const last = [...body.messages].reverse().find((m: { role: string }) => m.role === 'user')?.content ?? '';
      if (body.messages.at(-1)?.role === 'tool') return { text: 'A colleague will write to you here shortly.' };
      if (String(last).includes('a person')) return { tool_calls: [{ name: 'handoff', arguments: { reason: 'asked for a person' } }] };
      return { text: `Agent: ${last}` };
    },
  });
  const serviceOptions = { msgapp: new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 }), llm: { baseUrl: llm.url, model: 'fake-model' } };
  // The worker transcribes voice notes with the embedded whisper.cpp, as a deployment without TRANSCRIBE_BASE_URL does.
  const transcriber = transcriberFromConfig(testConfig({ CONCIERGE_MODELS_DIR: MODELS_DIR, TRANSCRIBE_LANGUAGE: 'en' }));
  tw = await startTestWorker(db, { ...serviceOptions, transcriber });
  relay = await startInboundDispatcher(tw);
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions,
    msgappWebhook: { appSecret: APP_SECRET, verifyToken: 'verify-me' },
    temporal: { client: tw.client, taskQueue: tw.taskQueue },
  });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  sandbox.setWebhookUrl(`http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/webhooks/msgapp`);
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['workflows:read', 'workflows:write', 'workflows:publish', 'conversations:read', 'conversations:write'])).key);
  const cred = (await t.services.credentials.create(ws, 'msgapp_access_token', 'number', 'token-1')).id;
  await publishedAgent(NUMBER, cred, [{ type: 'sender' }, { type: 'handoff', message: 'A colleague will write to you here shortly.' }]);
  // Publishes on the number but cannot send: its customers' messages are recorded, never answered.
  await publishedAgent(SILENT_NUMBER, cred, []);
}, 60_000);
afterAll(async () => {
  await closeInOrder([
    // The API first: no request is left waiting on a worker that is gone.
    ['app', t && (() => t.close())],
    ['relay', relay && (() => relay.stop())],
    ['worker', tw && (() => tw.close())],
    ['fake model', llm && (() => llm.close())],
    ['sandbox', sandbox && (() => sandbox.close())],
    ['database', db && (() => db.drop())],
  ]);
  LocalWhisperTranscriber.unloadAll();
}, 120_000);

async function publishedAgent(n: { id: string; display: string }, credentialId: string, actions: unknown[]): Promise<string> {
  const created = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Shop helper', instructions: 'Help customers.', triggers: { msgapp: { number: n.display, phone_number_id: n.id, credential_id: credentialId } }, actions },
  });
  expect(created.statusCode).toBe(201);
  const id = created.json().id;
  expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${id}/publish`, headers: auth })).statusCode).toBe(200);
  return id;
}

 
const q = <T = any>(sql: string, params: unknown[] = []) => db.orm.em.fork().execute<T[]>(sql, params);
const sentTo = (to: string) => sandbox.sent.filter((s) => s.body.to === to);
const textOf = (s: { body: Record<string, unknown> }) => (s.body.text as { body: string }).body;

/** Waits until `check` holds (the reply travels through several workflows). */
async function until<T>(what: string, check: () => Promise<T | undefined | null | false> | T | undefined | null | false, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The activities (not local ones) an inbound message's workflow scheduled, by type. */
async function inboundActivities(providerMessageId: string): Promise<string[]> {
  const history = await tw.client.workflow.getHandle(msgappInboundWorkflowId(providerMessageId)).fetchHistory();
  return (history.events ?? []).flatMap((e) => (e.activityTaskScheduledEventAttributes?.activityType?.name ? [e.activityTaskScheduledEventAttributes.activityType.name] : []));
}

/** A customer writes; resolves with the recorded message id once its inbound workflow ended. */
async function customerWrites(from: string, text: string, to = NUMBER.id, opts: { reply?: boolean } = {}) {
  const sent = await sandbox.injectInbound({ from, to, text, profileName: 'Robin' });
  expect(sent.webhookStatus).toBe(200);
  const done = await inboundDone(tw, sent.providerMessageId, opts);
  if (done.status !== 'recorded') throw new Error(`inbound ${done.status}`);
  return { ...done, providerMessageId: sent.providerMessageId };
}

test("a customer's message is answered by the agent through the conversation actor: one send, statuses flow, the transcript holds both", async () => {
  const customer = '+15557001001';
  const inbound = await customerWrites(customer, 'Where is my order?');
  expect(inbound.answered).toBe(true);
  const [conv] = await q(`select conversation_id from messages where id = ?`, [inbound.messageId]);
  const replyId = agentReplyId(inbound.messageId);

  // The reply leaves through message-send:<reply id>, a child of the conversation's actor.
  expect(await workflowResult(tw.client, messageSendWorkflowId(replyId))).toMatchObject({ status: 'sent' });
  // Started by the actor's send step (eagerly, on this worker): the actor's history holds that step, not a child.
  const actorSteps = await historySteps(tw.client, conversationWorkflowId(conv.conversation_id));
  expect(actorSteps.activities).toEqual(['runAgentTurn', 'sendAgentReply']);
  expect(actorSteps.patches).toContain(REPLY_SEND_ACTIVITY_PATCH);
  expect((await historySteps(tw.client, messageSendWorkflowId(replyId))).eager).toBe(true);
  const out = sentTo(customer);
  expect(out.map(textOf)).toEqual(['Agent: Where is my order?']);
  expect(out[0].phoneNumberId).toBe(NUMBER.id);
  // The model saw the customer's words as the user's turn.
  expect(llm.requests.at(-1)!.body.messages.at(-1)).toEqual({ role: 'user', content: 'Where is my order?' });

  // Statuses of the reply flow like any send's: sent, then the provider's delivered and read.
  await until('delivered and read', async () => {
    const events = await q(`select payload from webhook_events where type = 'message.status' and payload::jsonb -> 'data' ->> 'message_id' = ?`, [replyId]);
    const statuses = events.map((e) => JSON.parse(e.payload).data.status);
    return ['sent', 'delivered', 'read'].every((s) => statuses.includes(s)) && statuses;
  });
  const [row] = await q(`select source, direction, conversation_id, status, text from messages where id = ?`, [replyId]);
  expect(row).toEqual({ source: 'agent', direction: 'outbound', conversation_id: conv.conversation_id, status: 'read', text: 'Agent: Where is my order?' });
  // A text message has no media: the webhook recorded it, and the relay handed it to the actor (no workflow of its own).
  const own = await tw.client.workflow.getHandle(msgappInboundWorkflowId(inbound.providerMessageId)).describe().then(() => 'exists', () => 'none');
  expect(own).toBe('none');
  // message.inbound went out too, whether or not the agent answers.
  expect(await q(`select 1 from webhook_events where type = 'message.inbound' and payload::jsonb -> 'data' ->> 'message_id' = ?`, [inbound.messageId])).toHaveLength(1);

  // The transcript: the customer's message and the agent's reply, under the messages' ids.
  const transcript = await q(`select id, role, text, reply_to from chat_messages where conversation_id = ? order by created_at`, [conv.conversation_id]);
  expect(transcript).toEqual([
    { id: inbound.messageId, role: 'user', text: 'Where is my order?', reply_to: null },
    { id: replyId, role: 'assistant', text: 'Agent: Where is my order?', reply_to: inbound.messageId },
  ]);

  // The reply reads through its conversation's timeline, as the agent's.
  const timeline = await t.app.inject({ method: 'GET', url: `/api/v1/conversations/${conv.conversation_id}/events`, headers: auth });
  expect(timeline.json().events.filter((e: { type: string }) => e.type.startsWith('message.')).map((e: { type: string; data: Record<string, unknown> }) => [e.type, e.data.message_id, e.data.author ?? null])).toEqual(
    expect.arrayContaining([
      ['message.received', inbound.messageId, null],
      ['message.sent', replyId, 'agent'],
    ]),
  );
  // GET /api/v1/messages lists messages sent through the API only.
  const list = await t.app.inject({ method: 'GET', url: '/api/v1/messages', headers: auth });
  expect(list.statusCode).toBe(200);
  expect(list.json().messages.map((m: { id: string }) => m.id)).not.toContain(replyId);
  // The actor so far (one turn, one message-send child): replayed by test/replay.
  await maybeRecordHistory(tw.client, conversationWorkflowId(conv.conversation_id), 'conversation-msgapp-send-activity');
});

test('a duplicate webhook and a second message: each message is answered exactly once, in order', async () => {
  const customer = '+15557001002';
  const first = await customerWrites(customer, 'first question');
  // The provider re-sends the very same notification (same bytes, same signature): 200, nothing new.
  const original = sandbox.callbacks.find((cb) => cb.kind === 'inbound' && cb.body.includes(first.providerMessageId))!;
  const again = await fetch(original.url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': signHubPayload(original.body, APP_SECRET) }, body: original.body });
  expect(again.status).toBe(200);
  expect(await q(`select count(*)::int as n from messages where provider_message_id = ?`, [first.providerMessageId])).toEqual([{ n: 1 }]);
  const second = await customerWrites(customer, 'second question');
  await until('two replies', () => sentTo(customer).length >= 2 && true);
  await sleep(500);
  expect(sentTo(customer).map(textOf)).toEqual(['Agent: first question', 'Agent: second question']);
  expect(second.answered).toBe(true);
  // The history the model saw for the second turn holds the first exchange.
  const lastRequest = llm.requests.at(-1)!.body.messages.map((m: { role: string; content: string }) => `${m.role}:${m.content}`);
  expect(lastRequest.slice(1)).toEqual(['user:first question', 'assistant:Agent: first question', 'user:second question']);
});

test("handoff: the agent tells the customer, then stays silent while a human writes through POST /api/v1/messages; resolving lets it answer again", async () => {
  const customer = '+15557001003';
  const asked = await customerWrites(customer, 'I want a person please');
  await until('the handoff reply', () => sentTo(customer).length === 1 && true);
  expect(sentTo(customer).map(textOf)).toEqual(['A colleague will write to you here shortly.']);
  const [conv] = await q(`select conversation_id from messages where id = ?`, [asked.messageId]);
  const convId = conv.conversation_id as string;
  const cases = await t.app.inject({ method: 'GET', url: '/api/v1/cases', headers: auth });
  expect(cases.json().cases).toEqual(expect.arrayContaining([expect.objectContaining({ id: convId })]));

  // While a human has it: recorded and emitted, not answered (no model call, nothing sent).
  const calls = llm.requests.length;
  const held = await customerWrites(customer, 'hello? anyone?', NUMBER.id, { reply: false });
  await until('the held turn', async () => (await tw.client.workflow.getHandle(conversationWorkflowId(convId)).describe()) && (await q(`select 1 from chat_messages where id = ?`, [held.messageId])).length);
  await sleep(700);
  expect(llm.requests.length).toBe(calls);
  expect(sentTo(customer)).toHaveLength(1);
  expect(await q(`select 1 from webhook_events where type = 'message.inbound' and payload::jsonb -> 'data' ->> 'message_id' = ?`, [held.messageId])).toHaveLength(1);

  // The human writes through the API: it reaches the customer and the transcript (as a human's message).
  const human = await t.app.inject({ method: 'POST', url: '/api/v1/messages', headers: auth, payload: { from: NUMBER.display, to: customer, text: 'Hi, Sam here. Your order left today.' } });
  expect(human.statusCode).toBe(201);
  expect(sentTo(customer).map(textOf).at(-1)).toBe('Hi, Sam here. Your order left today.');
  const humanRow = await q(`select role, text from chat_messages where id = ?`, [human.json().id]);
  expect(humanRow).toEqual([{ role: 'human', text: 'Hi, Sam here. Your order left today.' }]);

  // Resolved: the agent answers again, with the human's message in its history.
  const resolved = await t.app.inject({ method: 'PATCH', url: `/api/v1/conversations/${convId}`, headers: auth, payload: { needs_human: false } });
  expect(resolved.statusCode).toBe(200);
  await customerWrites(customer, 'thanks, one more thing');
  await until('the answer after resolving', () => sentTo(customer).length === 3 && true);
  expect(sentTo(customer).map(textOf).at(-1)).toBe('Agent: thanks, one more thing');
  const seen = llm.requests.at(-1)!.body.messages.map((m: { role: string; content: string }) => m.content);
  expect(seen).toContain('Hi, Sam here. Your order left today.');
});

test('an agent without a sender action records and emits the message but never answers', async () => {
  const customer = '+15557001004';
  const calls = llm.requests.length;
  const inbound = await customerWrites(customer, 'hello there', SILENT_NUMBER.id);
  expect(inbound).toMatchObject({ answered: false, silence: 'the agent has no sender action' });
  await sleep(500);
  expect(sentTo(customer)).toEqual([]);
  expect(llm.requests.length).toBe(calls);
  expect(await q(`select 1 from webhook_events where type = 'message.inbound' and payload::jsonb -> 'data' ->> 'message_id' = ?`, [inbound.messageId])).toHaveLength(1);
});

test("a document's text reaches the agent with the customer's caption; the media element carries its sha256", async () => {
  const customer = '+15557001005';
  const bytes = Buffer.from('Invoice number 4711\nTotal due: 99 EUR by 1 December.\n');
  const sent = await sandbox.injectInbound({ from: customer, to: NUMBER.id, text: 'Is this right?', media: { kind: 'document', mimeType: 'text/plain', bytes, filename: 'invoice.txt' } });
  const done = await inboundDone(tw, sent.providerMessageId);
  expect(done).toMatchObject({ status: 'recorded', answered: true });
  expect(await inboundActivities(sent.providerMessageId)).toEqual(['downloadInboundMedia', 'readInboundMedia']);
  await until('the reply', () => sentTo(customer).length === 1 && true);
  const asked = llm.requests.at(-1)!.body.messages.at(-1).content as string;
  expect(asked).toContain('Is this right?');
  expect(asked).toContain('[Attached file "invoice.txt"]');
  expect(asked).toContain('Invoice number 4711');
  const [event] = await q(`select payload from webhook_events where type = 'message.inbound' and payload::jsonb -> 'data' ->> 'message_id' = ?`, [(done as { messageId: string }).messageId]);
  expect(JSON.parse(event.payload).data.media).toEqual([expect.objectContaining({ type: 'document', filename: 'invoice.txt', sha256: createHash('sha256').update(bytes).digest('hex') })]);
});

test("a voice note (Ogg Opus, as messaging apps send them) reaches the agent as its transcript, from the worker's embedded transcriber", async () => {
  const customer = '+15557001006';
  const spoken = speak('Where is my parcel? I ordered it last week.');
  const sent = await sandbox.injectInbound({ from: customer, to: NUMBER.id, media: { kind: 'voice', mimeType: 'audio/ogg; codecs=opus', bytes: spoken.ogg } });
  expect(await inboundDone(tw, sent.providerMessageId)).toMatchObject({ status: 'recorded', answered: true });
  await until('the reply', () => sentTo(customer).length === 1 && true);
  const asked = llm.requests.at(-1)!.body.messages.at(-1).content as string;
  // The attachment's line, then its text: the transcript.
  const [line, ...text] = asked.split('\n');
  expect(line).toBe('[Attached file "audio from the customer"]');
  expect(wordErrorRate(spoken.text, text.join(' '))).toBeLessThanOrEqual(0.2);
});

