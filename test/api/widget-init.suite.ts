import { userHash } from '../../domain/widget/sites';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

let db: TestDatabase;
let t: TestApp;
let ws: string;
let auth: Record<string, string>;
let site: { site_id: string; site_secret: string };
let agentId: string;

const ORIGIN = 'https://shop.example';

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const agent = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Shop helper', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [ORIGIN], voice_chat: true, response_delivery: 'complete' } } },
  });
  agentId = agent.json().id;
  await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agentId}/publish`, headers: auth });
  site = await t.services.sites.create(ws, agentId, ['https://Shop.Example']);
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const init = (payload: unknown = {}, headers: Record<string, string | undefined> = {}) =>
  t.app.inject({
    method: 'POST',
    url: '/api/public/widget/init',
    headers: Object.fromEntries(Object.entries({ 'x-concierge-site': site.site_id, origin: ORIGIN, ...headers }).filter(([, v]) => v !== undefined)) as Record<string, string>,
    payload: payload as object,
  });

describe('widget site authentication and init', () => {
  test('anonymous init: a conversation and a customer, the agent, capabilities with warnings, CORS echoing the origin', async () => {
    const res = await init();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      conversation_id: expect.stringMatching(/^conv_/),
      customer_id: expect.stringMatching(/^cus_/),
      handoff: { active: false },
      team: { available: true, away_message: null, next_available_at: null, reply_time_minutes: null },
      auth_level: 'anonymous',
      agent: { id: agentId, name: 'Shop helper' },
      capabilities: { voice_chat: false, dial_out: false, file_upload: false },
      capability_warnings: ['voice_chat is enabled but no speech-to-text (TRANSCRIBE_BASE_URL, or the embedded model: npm run models:fetch)'],
      response_delivery: 'complete',
      appearance: { brand_color: '#243b6b', position: 'right', launcher_label: null, theme: 'auto', language: 'auto' },
    });
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    expect(String(res.headers.vary)).toMatch(/Origin/i);
    // The same conversation is resumed by its id.
    const again = await init({ conversation_id: res.json().conversation_id });
    expect(again.json()).toMatchObject({ conversation_id: res.json().conversation_id, customer_id: res.json().customer_id });
  });

  test('GET /config: the launcher\'s look and agent, with no session and no conversation created', async () => {
    const count = async () => (await db.orm.em.fork().getConnection().execute<Array<{ n: string }>>('select count(*)::int as n from conversations'))[0].n;
    const before = await count();
    const res = await t.app.inject({ method: 'GET', url: '/api/public/widget/config', headers: { 'x-concierge-site': site.site_id, origin: ORIGIN } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      agent: { name: 'Shop helper' },
      appearance: { brand_color: '#243b6b', position: 'right', launcher_label: null, theme: 'auto', language: 'auto' },
      capabilities: { file_upload: false },
    });
    expect(await count()).toBe(before);
    const refused = await t.app.inject({ method: 'GET', url: '/api/public/widget/config', headers: { 'x-concierge-site': site.site_id, origin: 'https://elsewhere.example' } });
    expect([refused.statusCode, refused.json().error]).toEqual([403, 'origin_not_allowed']);
  });

  test('preflight from any origin is answered without credentials', async () => {
    const res = await t.app.inject({
      method: 'OPTIONS',
      url: '/api/public/widget/init',
      headers: { origin: 'https://elsewhere.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-concierge-site' },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('https://elsewhere.example');
    expect(String(res.headers['access-control-allow-headers']).toLowerCase()).toContain('x-concierge-site');
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
  });

  test.each([
    [{ 'x-concierge-site': undefined }, 400, 'missing_site_id'],
    [{ 'x-concierge-site': 'site_000000000000000000000000' }, 404, 'unknown_site'],
    [{ origin: undefined }, 403, 'origin_not_allowed'],
    [{ origin: 'https://evil.example' }, 403, 'origin_not_allowed'],
    [{ origin: 'https://shop.example.evil.example' }, 403, 'origin_not_allowed'],
  ])('site checks: %j → %i %s', async (headers, status, code) => {
    const res = await init({}, headers);
    expect(res.statusCode).toBe(status);
    expect(res.json()).toEqual({ error: code, message: expect.any(String) });
  });

  test('Origin matches case-insensitively', async () => {
    expect((await init({}, { origin: 'HTTPS://SHOP.EXAMPLE' })).statusCode).toBe(200);
  });

  test('identity levels: self-asserted, verified (one customer across sessions), failed', async () => {
    expect((await init({ user_context: { external_id: 'u-1' } })).json().auth_level).toBe('self_asserted');
    const hash = userHash(site.site_secret, site.site_id, 'u-1');
    const a = (await init({ user_context: { external_id: 'u-1', user_hash: hash } })).json();
    const b = (await init({ user_context: { external_id: 'u-1', user_hash: hash } })).json();
    expect(a.auth_level).toBe('verified');
    expect(b.customer_id).toBe(a.customer_id);
    const bad = await init({ user_context: { external_id: 'u-1', user_hash: userHash(site.site_secret, site.site_id, 'u-2') } });
    expect(bad.statusCode).toBe(403);
    expect(bad.json().error).toBe('identity_verification_failed');
  });

  test('secret rotation: the old secret verifies during the grace period, not after', async () => {
    const oldHash = userHash(site.site_secret, site.site_id, 'u-rot');
    const rotated = await t.services.sites.rotateSecret(site.site_id, 1);
    expect((await init({ user_context: { external_id: 'u-rot', user_hash: oldHash } })).json().auth_level).toBe('verified');
    expect((await init({ user_context: { external_id: 'u-rot', user_hash: userHash(rotated.site_secret, site.site_id, 'u-rot') } })).json().auth_level).toBe('verified');
    await db.orm.em.fork().execute(`update sites set previous_expires_at = now() - interval '1 second' where id = ?`, [site.site_id]);
    expect((await init({ user_context: { external_id: 'u-rot', user_hash: oldHash } })).json().error).toBe('identity_verification_failed');
    site = { site_id: site.site_id, site_secret: rotated.site_secret };
  });

  test('require identity verification: external_id without user_hash is refused', async () => {
    await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/agents/${agentId}`,
      headers: auth,
      payload: { triggers: { web_chat: { allowed_origins: [ORIGIN], require_identity_verification: true } } },
    });
    const res = await init({ user_context: { external_id: 'u-3' } });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('identity_verification_required');
    expect((await init()).json().auth_level).toBe('anonymous');
  });

  test('a suspended site is refused; resumed, it answers again; an unpublished agent is 503 no_workflow_configured', async () => {
    await t.services.sites.setStatus(site.site_id, 'suspended');
    expect((await init()).json().error).toBe('site_suspended');
    await t.services.sites.setStatus(site.site_id, 'active');
    expect((await init()).statusCode).toBe(200);
    const draft = (await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { name: 'Draft' } })).json();
    const draftSite = await t.services.sites.create(ws, draft.id, [ORIGIN]);
    const res = await init({}, { 'x-concierge-site': draftSite.site_id });
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toBe('no_workflow_configured');
  });

  test('dial-out (/call) is behind the site checks, then validates its body', async () => {
    const denied = await t.app.inject({ method: 'POST', url: '/api/public/widget/call', headers: { origin: ORIGIN }, payload: {} });
    expect(denied.json().error).toBe('missing_site_id');
    const res = await t.app.inject({ method: 'POST', url: '/api/public/widget/call', headers: { 'x-concierge-site': site.site_id, origin: ORIGIN }, payload: {} });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_request');
  });
});
