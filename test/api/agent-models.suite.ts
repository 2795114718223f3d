import { randomBytes } from 'node:crypto';
import { Agent } from '../../db/entities';
import { policyFromCidrs } from '../../lib/net/ssrf';
import { bearer, createKey, createWorkspace, publishedWebAgent, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { recordSecret } from '../support/secret-log';
import { startTestWorker, type TestWorker } from '../support/temporal';

/**
 * The installation's LLM key is spent only as the operator allows (docs/security.md, "The
 * operator's model key"): an allow-list of models and a max_tokens cap, refused where a request sets them and
 * applied again when the turn runs (whatever stored the spec), per-model prices in the
 * usage report, and a workspace's own llm credential free of both.
 */
const ORIGIN = 'https://shop.example';
const OWN_KEY = `sk-own-${randomBytes(16).toString('hex')}`;
let db: TestDatabase;
/** The installation's model server (LLM_BASE_URL). */
let llm: FakeLlm;
/** A workspace's own model server, reached with its own key. */
let own: FakeLlm;
let tw: TestWorker;
let t: TestApp;
let ws: string;
let auth: Record<string, string>;

beforeAll(async () => {
  db = await createTestDatabase();
  recordSecret('provider token', OWN_KEY);
  llm = await startFakeLlm({ reply: () => ({ text: 'Answered on the installation key.' }) });
  own = await startFakeLlm({ reply: () => ({ text: 'Answered on the workspace key.' }) });
  const services = {
    llm: { baseUrl: llm.url, model: 'fake-default' },
    // The workspace's base_url is on loopback: the operator's allow list names it.
    sender: { policy: policyFromCidrs('127.0.0.0/8'), timeoutMs: 5_000 },
    models: { allowed: ['fake-big'], maxTokensCap: 1_000, prices: { 'fake-big': 0.05 } },
  };
  tw = await startTestWorker(db, services);
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: services, temporal: { client: tw.client, taskQueue: tw.taskQueue } });
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['workflows:read', 'workflows:write', 'workflows:publish', 'credentials:write', 'conversations:read'])).key);
}, 60_000);

afterAll(async () => {
  await t?.close();
  await tw?.close();
  await llm?.close();
  await own?.close();
  await db?.drop();
});

const api = (method: 'POST' | 'PATCH', url: string, payload: object) => t.app.inject({ method, url, headers: auth, payload });

/** One widget message to a published agent; the reply's text and id. */
async function turn(agentId: string): Promise<{ text: string; message_id: string }> {
  const site = await t.services.sites.create(ws, agentId, [ORIGIN]);
  const widget = (url: string, payload: object) => t.app.inject({ method: 'POST', url: `/api/public/widget/${url}`, headers: { 'x-concierge-site': site.site_id, origin: ORIGIN }, payload });
  const conv = (await widget('init', {})).json();
  const res = await widget('send', { conversation_id: conv.conversation_id, text: 'hello' });
  expect(res.statusCode).toBe(200);
  return res.json();
}

const usageKinds = async () => (await t.services.credits.usage(ws, { limit: 50 })).usage;

describe('where a request sets the model', () => {
  test('a model the operator does not allow is 400 invalid_request naming model.name at POST, from-spec and PATCH', async () => {
    const create = await api('POST', '/api/v1/agents', { name: 'Pricey', model: { name: 'o1-pro', max_tokens: 32_000 } });
    expect(create.statusCode).toBe(400);
    expect(create.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(/^body\.model\.name: 'o1-pro' is not a model this installation allows \(allowed: fake-default, fake-big\)/) });

    const fromSpec = await api('POST', '/api/v1/agents/from-spec', { spec: { name: 'Pricey', model: { name: 'o1-pro' } } });
    expect(fromSpec.statusCode).toBe(400);
    expect(fromSpec.json()).toMatchObject({ error: 'invalid_request', message: expect.stringMatching(/model\.name/) });

    const agent = (await api('POST', '/api/v1/agents', { name: 'Plain' })).json();
    const patch = await api('PATCH', `/api/v1/agents/${agent.id}`, { model: { name: 'o1-pro', max_tokens: 32_000 } });
    expect(patch.statusCode).toBe(400);
    expect(patch.json()).toMatchObject({ error: 'invalid_request', message: expect.stringMatching(/^body\.model\.name: /) });
  });

  test('max_tokens above LLM_MAX_TOKENS_CAP is refused naming model.max_tokens; an allowed model within the cap is accepted', async () => {
    const agent = (await api('POST', '/api/v1/agents', { name: 'Plain' })).json();
    const over = await api('PATCH', `/api/v1/agents/${agent.id}`, { model: { name: 'fake-big', max_tokens: 32_000 } });
    expect(over.statusCode).toBe(400);
    expect(over.json()).toEqual({ error: 'invalid_request', message: 'body.model.max_tokens: at most 1000 on this installation\'s model (LLM_MAX_TOKENS_CAP)' });
    const ok = await api('PATCH', `/api/v1/agents/${agent.id}`, { model: { name: 'fake-big', max_tokens: 1_000 } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().spec.model).toMatchObject({ name: 'fake-big', max_tokens: 1_000 });
  });

  test('model.credential_id must be an llm credential of the workspace (404 credential_not_found naming it, as a move to a missing folder)', async () => {
    for (const id of ['cred_000000000000000000000000', 'not-a-credential-id']) {
      const res = await api('POST', '/api/v1/agents', { name: 'Own', model: { name: 'o1-pro', credential_id: id } });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ error: 'credential_not_found', message: expect.stringMatching(/^body\.model\.credential_id: /) });
    }
  });
});

describe('when the turn runs', () => {
  test('an agent stored with a refused model and max_tokens (as before the fix) runs on the default model with max_tokens capped', async () => {
    const agentId = await publishedWebAgent(t.app, auth, ORIGIN);
    const em = db.orm.em.fork();
    const row = await em.findOneOrFail(Agent, { id: agentId });
    // Written directly, as the API let it be before the allow-list.
    await em.nativeUpdate(Agent, { id: agentId }, { spec: { ...row.spec, model: { name: 'o1-pro', temperature: 0.3, max_tokens: 32_000 } } });
    const before = llm.requests.length;
    const reply = await turn(agentId);
    expect(reply.text).toBe('Answered on the installation key.');
    const sent = llm.requests.slice(before).map((r) => r.body);
    expect(sent.length).toBeGreaterThan(0);
    for (const body of sent) {
      expect(body.model).toBe('fake-default');
      expect(body.max_tokens).toBe(1_000);
    }
  });

  test('each model’s tokens are charged at its own price: an allowed model at LLM_MODEL_PRICES, the default at the flat price', async () => {
    const big = await publishedWebAgent(t.app, auth, ORIGIN, { model: { name: 'fake-big', max_tokens: 500 } });
    const before = llm.requests.length;
    const reply = await turn(big);
    expect(llm.requests.slice(before).map((r) => [r.body.model, r.body.max_tokens])).toEqual([['fake-big', 500]]);
    const [recorded] = (await db.orm.em.fork().execute(`select kind, quantity from usage_records where reference = ?`, [`reply:${reply.message_id}`])) as Array<{ kind: string; quantity: number }>;
    expect(recorded).toMatchObject({ kind: 'llm_tokens:fake-big', quantity: expect.any(Number) });
    const usage = await usageKinds();
    expect(usage).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'llm_tokens:fake-big', unit: 'token', unit_price: 0.00005, currency: 'USD' })]));
    expect(usage).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'llm_tokens', unit_price: 0.000002 })]));
  });

  test('a workspace’s own llm credential bypasses the allow-list and the cap: its server gets the model and max_tokens asked, with its key, and nothing is metered', async () => {
    const cred = await api('POST', '/api/v1/credentials', { name: 'Our model server', provider: 'llm', api_key: OWN_KEY, base_url: own.url });
    expect(cred.statusCode).toBe(201);
    const agentId = await publishedWebAgent(t.app, auth, ORIGIN, { model: { name: 'o1-pro', max_tokens: 32_000, credential_id: cred.json().id } });
    const [installation, ownBefore] = [llm.requests.length, own.requests.length];
    const reply = await turn(agentId);
    expect(reply.text).toBe('Answered on the workspace key.');
    expect(llm.requests.length).toBe(installation);
    const sent = own.requests.slice(ownBefore);
    expect(sent.map((r) => [r.body.model, r.body.max_tokens])).toEqual([['o1-pro', 32_000]]);
    expect(sent[0].headers.authorization).toBe(`Bearer ${OWN_KEY}`);
    const rows = await db.orm.em.fork().execute(`select 1 from usage_records where reference = ?`, [`reply:${reply.message_id}`]);
    expect(rows).toEqual([]);
  });
});
