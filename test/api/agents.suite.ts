import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { EXAMPLE_SPEC } from '../../domain/agents/spec';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

let db: TestDatabase;
let t: TestApp;
let withLlm: TestApp;
let auth: Record<string, string>;
let ws: string;
let llm: http.Server;
let llmReply = '';

beforeAll(async () => {
  // An OpenAI-compatible chat-completions server on loopback.
  llm = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: llmReply } }] })));
  });
  await new Promise<void>((r) => llm.listen(0, '127.0.0.1', r));
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  withLlm = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions: { llm: { baseUrl: `http://127.0.0.1:${(llm.address() as AddressInfo).port}`, model: 'fake' } },
  });
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['workflows:read', 'workflows:write', 'workflows:publish', 'kb:write', 'kb:read'])).key);
});
afterAll(async () => {
  await t.close();
  await withLlm.close();
  await db.drop();
  await new Promise((r) => llm.close(r));
});

const post = (url: string, payload: unknown, app = t) => app.app.inject({ method: 'POST', url, headers: auth, payload: payload as object });

describe('agents', () => {
  test('create a draft from spec fields; defaults filled; get and list agree', async () => {
    const res = await post('/api/v1/agents', { name: 'Helper', instructions: 'Be kind.' });
    expect(res.statusCode).toBe(201);
    const agent = res.json();
    expect(agent).toMatchObject({
      id: expect.stringMatching(/^agt_/),
      name: 'Helper',
      status: 'draft',
      runnable: false,
      invalid_reasons: [],
      published_at: null,
      spec: { name: 'Helper', instructions: 'Be kind.', model: { temperature: 0.3, max_tokens: 800 }, knowledge_base: { folder_ids: [], file_ids: [] }, triggers: {}, actions: [], templates: [] },
    });
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/agents/${agent.id}`, headers: auth })).json()).toEqual(agent);
    const list = (await t.app.inject({ method: 'GET', url: '/api/v1/agents?status=draft', headers: auth })).json();
    expect(list.agents.map((a: { id: string }) => a.id)).toContain(agent.id);
    expect(list.next_cursor).toBeNull();
  });

  test('the spec is validated, naming the field', async () => {
    for (const [payload, field] of [
      [{}, 'body.name'],
      [{ name: 'x', triggers: { msgapp: { number: '5551234', phone_number_id: '1' } } }, 'body.triggers.msgapp.number'],
      [{ name: 'x', triggers: { web_chat: { allowed_origins: ['https://a.example/path'] } } }, 'body.triggers.web_chat.allowed_origins'],
      [{ name: 'x', actions: [{ type: 'teleport' }] }, 'body.actions'],
      [{ name: 'x', templates: [{ name: 'Bad Name', body: 'hi', status: 'approved' }] }, 'body.templates'],
      [{ name: 'x', surprise: true }, 'surprise'],
    ] as const) {
      const res = await post('/api/v1/agents', payload);
      expect(res.statusCode).toBe(400);
      expect(res.json().message).toContain(field);
    }
  });

  test('from-spec takes the documented full example; publish records why it cannot run', async () => {
    const created = await post('/api/v1/agents/from-spec', { spec: EXAMPLE_SPEC });
    expect(created.statusCode).toBe(201);
    const published = await post(`/api/v1/agents/${created.json().id}/publish`, {});
    expect(published.statusCode).toBe(200);
    // The example names a credential and a folder that do not exist in this workspace.
    expect(published.json()).toMatchObject({
      status: 'published',
      runnable: false,
      invalid_reasons: ['credential cred_0a1b2c3d4e5f60718293a4b5 does not exist in this workspace', 'knowledge-base folder fld_3f2a9c0d1e4b5a6978c0d1e2 does not exist'],
    });
    expect(published.json().published_at).toEqual(expect.any(String));
  });

  test('publish reasons: empty instructions, a number without credential, no trigger; fixing them makes it runnable', async () => {
    const agent = (await post('/api/v1/agents', { name: 'Bare' })).json();
    const bare = (await post(`/api/v1/agents/${agent.id}/publish`, {})).json();
    expect(bare.invalid_reasons).toEqual(['instructions are empty', 'no trigger: add a msgapp number or a web_chat site']);
    const noCred = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/agents/${agent.id}`,
      headers: auth,
      payload: { instructions: 'Help.', triggers: { msgapp: { number: '+15550001111', phone_number_id: '42' } } },
    });
    expect(noCred.json().invalid_reasons).toEqual(['msgapp number +15550001111 has no credential_id for the provider\'s access token']);
    // A credential must exist in the workspace, and its ownership of the number be checked at a provider (this app has none).
    const unknownCred = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/agents/${agent.id}`,
      headers: auth,
      payload: { triggers: { msgapp: { number: '+15550001111', phone_number_id: '42', credential_id: 'cred_1' } }, actions: [{ type: 'sender' }] },
    });
    expect(unknownCred.json()).toMatchObject({ runnable: false, invalid_reasons: ['credential cred_1 does not exist in this workspace'] });
    const cred = await t.services.credentials.create(ws, 'msgapp_access_token', 'n', 'token');
    const unverified = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/agents/${agent.id}`,
      headers: auth,
      payload: { triggers: { msgapp: { number: '+15550001111', phone_number_id: '42', credential_id: cred.id } } },
    });
    expect(unverified.json()).toMatchObject({
      runnable: false,
      invalid_reasons: ['msgapp phone_number_id 42 cannot be verified: no msgapp provider is configured (MSGAPP_API_BASE)'],
    });
    const ok = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/agents/${agent.id}`,
      headers: auth,
      payload: { triggers: { web_chat: { allowed_origins: ['https://shop.example'] } } },
    });
    expect(ok.json()).toMatchObject({ status: 'published', runnable: true, invalid_reasons: [], spec: { instructions: 'Help.' } });
    expect((await t.app.inject({ method: 'PATCH', url: `/api/v1/agents/${agent.id}`, headers: auth, payload: { name: '' } })).statusCode).toBe(400);
    expect((await t.app.inject({ method: 'PATCH', url: '/api/v1/agents/agt_nope', headers: auth, payload: { name: 'x' } })).statusCode).toBe(404);
  });

  test('folder delete lists the published agents whose selection names the folder', async () => {
    const folder = (await post('/api/v1/kb/folders', { name: 'Agent docs' })).json();
    const agent = (await post('/api/v1/agents', { name: 'Reader', instructions: 'Read.', knowledge_base: { folder_ids: [folder.id] }, triggers: { web_chat: { allowed_origins: ['https://x.example'] } } })).json();
    await post('/api/v1/agents', { name: 'Draft reader', knowledge_base: { folder_ids: [folder.id] } });
    expect((await post(`/api/v1/agents/${agent.id}/publish`, {})).json().runnable).toBe(true);
    const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/kb/folders/${folder.id}`, headers: auth });
    expect(del.json()).toEqual({ success: true, affected_agents: [{ id: agent.id, name: 'Reader', status: 'published' }] });
    // The selection is left as it was.
    expect((await t.app.inject({ method: 'GET', url: `/api/v1/agents/${agent.id}`, headers: auth })).json().spec.knowledge_base.folder_ids).toEqual([folder.id]);
  });

  test('generate: 503 llm_not_configured without an LLM; a draft from a configured one; 422 for an unusable reply', async () => {
    const none = await post('/api/v1/agents/generate', { description: 'A bot that answers shipping questions.' });
    expect(none.statusCode).toBe(503);
    expect(none.json().error).toBe('llm_not_configured');

    llmReply = JSON.stringify({ name: 'Shipping helper', instructions: 'Answer shipping questions from the knowledge base.', actions: [{ type: 'kb_search' }, { type: 'sender' }] });
    const made = await post('/api/v1/agents/generate', { description: 'A bot that answers shipping questions.' }, withLlm);
    expect(made.statusCode).toBe(201);
    // The model may not grant itself the sender action: only kb_search and handoff are taken.
    expect(made.json()).toMatchObject({ status: 'draft', name: 'Shipping helper', spec: { actions: [{ type: 'kb_search', top_k: 5 }] } });

    llmReply = 'Sure! Here is your agent.';
    const bad = await post('/api/v1/agents/generate', { description: 'A bot that answers shipping questions.' }, withLlm);
    expect(bad.statusCode).toBe(422);
    expect(bad.json().error).toBe('generation_failed');
  });
});
