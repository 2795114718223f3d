import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { replay } from '../../bin/replay';
import { EncryptionCodec, temporalDataConverter } from '../../lib/crypto/payload-codec';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, type TestApp } from '../support/app';
import { asBrowser, CONSOLE_ORIGIN, signedInUser, type Browser } from '../support/console';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { indexed, startIndexDispatcher, upload } from '../support/kb';
import { startTestWorker } from '../support/temporal';
import { conversationWorkflowId } from '../../workflows/conversation';

/**
 * The console's conversation debugger (issue 31 part 6): a real turn against the fake model, with a knowledge-base
 * passage and a tool call, read back from the conversation workflow's history.
 */

let db: TestDatabase;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let llm: FakeLlm;
let ws: string;
let conversationId: string;
let owner: Browser;
let agent: Browser;
const ORIGIN = 'https://shop.example';
/** A key a visitor pasted, which the model echoes into a tool call: never shown by the debugger. */
const PASTED_KEY = 'sk-proj-Ab12Cd34Ef56Gh78Ij90';

/** The fake model: a tool call first (carrying the pasted key), then the answer with an e-mail address to mask. */
function reply(body: { messages: Array<{ role: string; content: string | null }> }) {
  const last = body.messages.at(-1)!;
  if (last.role === 'tool') return { text: 'Unworn boots can go back within 45 days [1]. Write to jane@example.com.' };
  return { text: '', tool_calls: [{ name: 'suggest_replies', arguments: { suggestions: ['Start a return', `key ${PASTED_KEY}`] } }] };
}

beforeAll(async () => {
  db = await createTestDatabase();
  llm = await startFakeLlm({ reply });
  tw = await startTestWorker(db, { llm: { baseUrl: llm.url, model: 'fake-model' } });
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, temporal: { client: tw.client, taskQueue: tw.taskQueue }, config: { PUBLIC_BASE_URL: CONSOLE_ORIGIN }, serviceOptions: { publicBaseUrl: CONSOLE_ORIGIN } });
  ws = await createWorkspace(db.orm, 'Boots');
  const kbAuth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
  const dispatcher = await startIndexDispatcher(tw);
  try {
    const file = await upload(t.app, kbAuth, { filename: 'returns.md', content: '# Returns\n\nUnworn boots can be sent back within 45 days of delivery for a full refund.\n' });
    expect(await indexed(tw, file.json().id)).toBe('active');
  } finally {
    await dispatcher.stop();
  }
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { privacy: { mask_personal_details: true }, actions: [{ type: 'reply_elements', kinds: ['suggested_actions'] }] });
  const site = await t.services.sites.create(ws, agentId, [ORIGIN]);
  const widget = (url: string, payload: object) => t.app.inject({ method: 'POST', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': site.site_id, origin: ORIGIN }, payload });
  conversationId = (await widget('init', {})).json().conversation_id;
  const sent = await widget('send', { conversation_id: conversationId, text: 'how long do I have to return my boots?' });
  expect(sent.json().text).toBe('Unworn boots can go back within 45 days. Write to [email address hidden].');
  owner = await signedInUser(t.app, t.services, ws, 'owner');
  agent = await signedInUser(t.app, t.services, ws, 'agent');
}, 120_000);

afterAll(async () => {
  await t?.close();
  await tw?.close();
  await llm?.close();
  await db?.drop();
});

const turns = (b: Browser, id = conversationId) => t.app.inject({ method: 'GET', url: `/api/console/conversations/${id}/turns`, headers: asBrowser(b) });
const auditEvents = async () => (await t.services.audit.list(ws, { limit: 50, action: 'conversation.debug_viewed' })).events;

test("an owner sees the turn from its history: passages with scores, the prompt's parts, the tool call and its result, the unmasked output, latency by step; the view is audited", async () => {
  const before = (await auditEvents()).length;
  const res = await turns(owner);
  expect(res.statusCode).toBe(200);
  const view = res.json();
  expect(view.workflow).toMatchObject({ id: conversationWorkflowId(conversationId), run_id: expect.any(String), ui_url: expect.stringContaining(`/workflows/${encodeURIComponent(`conversation:${conversationId}`)}/`) });
  expect(view.unmasked).toBe(true);
  expect(view.turns).toHaveLength(1);
  const turn = view.turns[0];
  expect(turn).toMatchObject({ status: 'answered', traced: true, model: null, query: 'how long do I have to return my boots?' });
  expect(turn.passages).toEqual([expect.objectContaining({ file_name: 'returns.md', title: 'Returns', score: expect.any(Number), text: expect.stringContaining('Unworn boots can be sent back within 45 days') })]);
  expect(turn.passages[0].score).toBeGreaterThan(0);
  expect(turn.prompt).toMatchObject({ instructions: 'Help shoppers.', context: ['[1] returns.md (Returns)'], message: 'how long do I have to return my boots?' });
  expect(turn.tool_calls).toEqual([{ round: 1, name: 'suggest_replies', arguments: expect.stringContaining('{"suggestions":["Start a return"'), output: expect.any(String), ms: expect.any(Number) }]);
  expect(turn.tool_calls[0].output).not.toMatch(/error/);
  expect(turn.rounds).toHaveLength(2);
  expect(turn.output).toBe('Unworn boots can go back within 45 days. Write to [email address hidden].');
  expect(turn.output_unmasked).toBe('Unworn boots can go back within 45 days. Write to jane@example.com.');
  expect(turn.latency.map((l: { step: string }) => l.step)).toEqual(['waiting in the conversation', 'queued for a worker', 'the turn (last attempt)', 'retrieve', 'gather', 'generate', 'store', 'publish']);
  // The key the model echoed into the tool call is redacted.
  expect(res.body).not.toContain(PASTED_KEY);
  expect(turn.tool_calls[0].arguments).toContain('sk-[redacted]');
  const events = await auditEvents();
  expect(events).toHaveLength(before + 1);
  expect(events[0]).toMatchObject({ actor: { type: 'user', id: owner.userId }, target: { type: 'conversation', id: conversationId }, details: { unmasked: true, turns: 1 } });
});

test('the agent role sees the turn masked, without the unmasked output, and nothing is audited', async () => {
  const before = (await auditEvents()).length;
  const res = await turns(agent);
  expect(res.statusCode).toBe(200);
  const [turn] = res.json().turns;
  expect(res.json().unmasked).toBe(false);
  expect(turn.output_unmasked).toBeNull();
  expect(turn.passages).toHaveLength(1);
  expect(turn.tool_calls.map((c: { name: string }) => c.name)).toEqual(['suggest_replies']);
  expect(res.body).not.toContain('jane@example.com');
  expect(turn.rounds[1].text).toContain('[email address hidden]');
  expect(await auditEvents()).toHaveLength(before);
});

test("another workspace's people get 404, as for an unknown conversation", async () => {
  const other = await signedInUser(t.app, t.services, await createWorkspace(db.orm, 'Other'), 'owner');
  const res = await turns(other);
  expect(res.statusCode).toBe(404);
  expect(res.json()).toMatchObject({ error: 'not_found' });
  expect((await t.app.inject({ method: 'GET', url: `/api/console/conversations/${conversationId}/history`, headers: asBrowser(other) })).statusCode).toBe(404);
  expect((await turns(owner, 'conv_000000000000000000000000')).statusCode).toBe(404);
  // An API key never reaches the console's operations.
  const key = bearer((await createKey(t.services, ws, ['conversations:read'])).key);
  expect((await t.app.inject({ method: 'GET', url: `/api/console/conversations/${conversationId}/turns`, headers: key })).statusCode).toBe(401);
});

test('the export is a history `npm run replay` replays; owners and admins only, audited', async () => {
  expect((await t.app.inject({ method: 'GET', url: `/api/console/conversations/${conversationId}/history`, headers: asBrowser(agent) })).json()).toMatchObject({ error: 'forbidden' });
  const res = await t.app.inject({ method: 'GET', url: `/api/console/conversations/${conversationId}/history`, headers: asBrowser(owner) });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-disposition']).toMatch(/^attachment; filename="conversation_conv_[0-9a-f]+\.json"$/);
  // As stored: the payloads stay encrypted, so the file shows nothing of the conversation.
  expect(res.body).not.toContain('Unworn boots');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'debugger-export-'));
  const file = path.join(dir, 'history.json');
  fs.writeFileSync(file, res.body);
  const codec = tw.client.options.loadedDataConverter.payloadCodecs.find((c): c is EncryptionCodec => c instanceof EncryptionCodec)!;
  const lines: string[] = [];
  const failed = await replay([file], { workflowBundle: { codePath: process.env.TEST_WORKFLOW_BUNDLE! }, dataConverter: temporalDataConverter(codec) }, (l) => lines.push(l));
  expect(lines).toEqual([`OK   ${file} (conversationWorkflow)`]);
  expect(failed).toBe(0);
  fs.rmSync(dir, { recursive: true, force: true });
  const exported = (await t.services.audit.list(ws, { limit: 10, action: 'conversation.history_exported' })).events;
  expect(exported[0]).toMatchObject({ actor: { id: owner.userId }, target: { type: 'conversation', id: conversationId } });
});
