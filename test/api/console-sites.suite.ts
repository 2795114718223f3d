import { userHash } from '../../domain/widget/sites';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { asBrowser, CONSOLE_ORIGIN, signedInUser, type Browser } from '../support/console';
import { recordSecret } from '../support/secret-log';

let db: TestDatabase;
let t: TestApp;
let wsA: string;
let wsB: string;
let ownerA: Browser;
let adminA: Browser;
let agentA: Browser;
let viewerA: Browser;
let ownerB: Browser;
let agentOfA: string;
let agentOfB: string;

const SHOP = 'https://shop.example';

const as = (b: Browser) => ({
  get: (url: string) => t.app.inject({ method: 'GET', url, headers: asBrowser(b) }),
  post: (url: string, payload?: object) => t.app.inject({ method: 'POST', url, headers: asBrowser(b), ...(payload ? { payload } : {}) }),
  patch: (url: string, payload: object) => t.app.inject({ method: 'PATCH', url, headers: asBrowser(b), payload }),
});

/** A published web-chat agent of the workspace, made with a key as a backend makes one. */
async function publishedAgent(ws: string, name: string): Promise<string> {
  const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
  const made = await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { name, instructions: 'Help.', triggers: { web_chat: { allowed_origins: [SHOP], response_delivery: 'complete' } } } });
  expect(made.statusCode).toBe(201);
  expect((await t.app.inject({ method: 'POST', url: `/api/v1/agents/${made.json().id}/publish`, headers: auth })).statusCode).toBe(200);
  return made.json().id;
}

/** A site made by the owner in the console: its view with the secret shown once. */
async function createSite(by: Browser, agentId: string, origins = [SHOP]): Promise<{ id: string; site_secret: string } & Record<string, unknown>> {
  const res = await as(by).post('/api/console/sites', { agent_id: agentId, origins });
  expect(res.statusCode).toBe(201);
  recordSecret('site secret', res.json().site_secret);
  return res.json();
}

/** The widget's init on the site's page, as a signed-in visitor whose hash the customer's server signed with `secret`. */
const initAs = (siteId: string, secret?: string, externalId = 'user-42') =>
  t.app.inject({
    method: 'POST',
    url: '/api/public/widget/init',
    headers: { 'x-concierge-site': siteId, origin: SHOP },
    payload: secret ? { user_context: { external_id: externalId, user_hash: userHash(secret, siteId, externalId) } } : {},
  });

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, config: { PUBLIC_BASE_URL: CONSOLE_ORIGIN }, serviceOptions: { publicBaseUrl: CONSOLE_ORIGIN } });
  wsA = await createWorkspace(db.orm, 'Workspace A');
  wsB = await createWorkspace(db.orm, 'Workspace B');
  [ownerA, adminA, agentA, viewerA, ownerB] = await Promise.all([
    signedInUser(t.app, t.services, wsA, 'owner', 'owner-a@example.com'),
    signedInUser(t.app, t.services, wsA, 'admin'),
    signedInUser(t.app, t.services, wsA, 'agent'),
    signedInUser(t.app, t.services, wsA, 'viewer'),
    signedInUser(t.app, t.services, wsB, 'owner', 'owner-b@example.com'),
  ]);
  agentOfA = await publishedAgent(wsA, 'Shop helper');
  agentOfB = await publishedAgent(wsB, 'Other helper');
});
afterAll(async () => {
  await t?.close();
  await db?.drop();
});

describe('the console sites', () => {
  test('create shows the secret once, with the snippet to paste; the list and the site never show a secret', async () => {
    const made = await createSite(ownerA, agentOfA, ['https://Shop.Example/', 'https://www.shop.example']);
    expect(made).toEqual({
      id: expect.stringMatching(/^site_[0-9a-f]{24}$/),
      site_secret: expect.stringMatching(/^sitesec_[0-9a-f]{48}$/),
      agent: { id: agentOfA, name: 'Shop helper' },
      status: 'active',
      allowed_origins: ['https://shop.example', 'https://www.shop.example'],
      page_commands: [],
      appearance: { brand_color: '#243b6b', position: 'right', launcher_label: null, theme: 'auto', language: 'auto' },
      previous_secret: null,
      snippet: `<script src="${CONSOLE_ORIGIN}/widget.js" data-site-id="${made.id}"></script>`,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const list = await as(ownerA).get('/api/console/sites');
    expect(list.statusCode).toBe(200);
    const { site_secret: secret, ...view } = made;
    expect(list.json().sites).toContainEqual(view);
    const one = await as(ownerA).get(`/api/console/sites/${made.id}`);
    expect(one.json()).toEqual(view);
    for (const body of [list.body, one.body]) {
      expect(body).not.toContain(secret);
      expect(body).not.toMatch(/sitesec_|secret_sealed|sealed/);
    }
    // The widget works on the listed origin with the site id from the snippet.
    expect((await initAs(made.id)).statusCode).toBe(200);
  });

  test('create refuses an agent of another workspace, an unknown one and an origin that is not a bare origin', async () => {
    expect((await as(ownerA).post('/api/console/sites', { agent_id: agentOfB, origins: [SHOP] })).statusCode).toBe(404);
    expect((await as(ownerA).post('/api/console/sites', { agent_id: 'agt_000000000000000000000000', origins: [SHOP] })).statusCode).toBe(404);
    const bad = await as(ownerA).post('/api/console/sites', { agent_id: agentOfA, origins: ['https://shop.example/path'] });
    expect([bad.statusCode, bad.json().error, bad.json().message]).toEqual([400, 'invalid_request', expect.stringMatching(/^origins: /)]);
  });

  test('owner and admin manage sites; agent and viewer get 403 forbidden on every operation, by request', async () => {
    const site = await createSite(adminA, agentOfA);
    expect((await as(adminA).patch(`/api/console/sites/${site.id}`, { page_commands: ['navigate'] })).statusCode).toBe(200);
    for (const who of [agentA, viewerA]) {
      const answers = await Promise.all([
        as(who).get('/api/console/sites'),
        as(who).post('/api/console/sites', { agent_id: agentOfA, origins: [SHOP] }),
        as(who).get(`/api/console/sites/${site.id}`),
        as(who).patch(`/api/console/sites/${site.id}`, { origins: ['https://evil.example'] }),
        as(who).post(`/api/console/sites/${site.id}/rotate-secret`, {}),
        as(who).post(`/api/console/sites/${site.id}/suspend`),
        as(who).post(`/api/console/sites/${site.id}/resume`),
      ]);
      expect(answers.map((r) => [r.statusCode, r.json().error])).toEqual(answers.map(() => [403, 'forbidden']));
    }
    // An API key never reaches the console's operations.
    const key = (await createKey(t.services, wsA, ['workflows:write'])).key;
    expect((await t.app.inject({ method: 'GET', url: '/api/console/sites', headers: bearer(key) })).statusCode).toBe(401);
    // Without the CSRF token an unsafe request is refused.
    const noCsrf = await t.app.inject({ method: 'POST', url: `/api/console/sites/${site.id}/suspend`, headers: { cookie: asBrowser(ownerA).cookie, origin: CONSOLE_ORIGIN } });
    expect([noCsrf.statusCode, noCsrf.json().error]).toEqual([403, 'csrf_failed']);
    expect((await as(ownerA).get(`/api/console/sites/${site.id}`)).json()).toMatchObject({ status: 'active', allowed_origins: [SHOP], page_commands: ['navigate'] });
  });

  test('two workspaces see nothing of each other: every operation on the other\'s site id is 404 and changes nothing', async () => {
    const siteA = await createSite(ownerA, agentOfA);
    const siteB = await createSite(ownerB, agentOfB);
    expect((await as(ownerA).get('/api/console/sites')).json().sites.map((s: { id: string }) => s.id)).not.toContain(siteB.id);
    expect((await as(ownerB).get('/api/console/sites')).json().sites.map((s: { id: string }) => s.id)).toEqual([siteB.id]);
    for (const [who, other] of [
      [ownerA, siteB.id],
      [ownerB, siteA.id],
    ] as const) {
      const answers = await Promise.all([
        as(who).get(`/api/console/sites/${other}`),
        as(who).patch(`/api/console/sites/${other}`, { origins: ['https://evil.example'], page_commands: ['navigate'], appearance: { brand_color: '#000' } }),
        as(who).post(`/api/console/sites/${other}/rotate-secret`, { grace_hours: 0 }),
        as(who).post(`/api/console/sites/${other}/suspend`),
        as(who).post(`/api/console/sites/${other}/resume`),
      ]);
      expect(answers.map((r) => [r.statusCode, r.json().error])).toEqual(answers.map(() => [404, 'not_found']));
    }
    // Nothing changed: the old secrets still verify, the sites are active with their origins and look.
    for (const [who, site] of [
      [ownerA, siteA],
      [ownerB, siteB],
    ] as const) {
      expect((await as(who).get(`/api/console/sites/${site.id}`)).json()).toMatchObject({ status: 'active', allowed_origins: [SHOP], page_commands: [], previous_secret: null, appearance: { brand_color: '#243b6b' } });
      expect((await initAs(site.id, site.site_secret)).json().auth_level).toBe('verified');
    }
    const events = await db.orm.em.fork().execute(`select count(*)::int as n from audit_events where action = 'site.secret_rotated' and target_id in (?, ?)`, [siteA.id, siteB.id]);
    expect(events[0].n).toBe(0);
  });

  test('PATCH changes origins, page commands and look together, or nothing when one field is refused', async () => {
    const site = await createSite(ownerA, agentOfA);
    const res = await as(ownerA).patch(`/api/console/sites/${site.id}`, {
      origins: [SHOP, 'https://m.shop.example'],
      page_commands: ['navigate', 'open_checkout'],
      appearance: { brand_color: '#0A7', position: 'left', launcher_label: '  Help  ', theme: 'dark', language: 'fr' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      allowed_origins: [SHOP, 'https://m.shop.example'],
      page_commands: ['navigate', 'open_checkout'],
      appearance: { brand_color: '#00aa77', position: 'left', launcher_label: 'Help', theme: 'dark', language: 'fr' },
    });
    // The widget reads the new look.
    expect((await initAs(site.id)).json().appearance).toEqual({ brand_color: '#00aa77', position: 'left', launcher_label: 'Help', theme: 'dark', language: 'fr' });
    const refused = await as(ownerA).patch(`/api/console/sites/${site.id}`, { origins: ['https://new.example'], appearance: { launcher_label: 'x'.repeat(41) } });
    expect([refused.statusCode, refused.json().error, refused.json().message]).toEqual([400, 'invalid_request', expect.stringMatching(/^launcher_label: /)]);
    expect((await as(ownerA).get(`/api/console/sites/${site.id}`)).json().allowed_origins).toEqual([SHOP, 'https://m.shop.example']);
    // A label of null removes it; fields left out keep their value.
    expect((await as(ownerA).patch(`/api/console/sites/${site.id}`, { appearance: { launcher_label: null } })).json().appearance).toEqual({ brand_color: '#00aa77', position: 'left', launcher_label: null, theme: 'dark', language: 'fr' });
    // A removed origin is refused by the widget at once.
    await as(ownerA).patch(`/api/console/sites/${site.id}`, { origins: ['https://m.shop.example'] });
    const gone = await initAs(site.id);
    expect([gone.statusCode, gone.json().error]).toEqual([403, 'origin_not_allowed']);
  });

  test('rotate shows the new secret once; the old one still verifies user_hash during the grace period, then not; audited', async () => {
    const site = await createSite(ownerA, agentOfA);
    const before = Date.now();
    const res = await as(ownerA).post(`/api/console/sites/${site.id}/rotate-secret`, { grace_hours: 2 });
    expect(res.statusCode).toBe(200);
    const rotated = res.json();
    recordSecret('site secret', rotated.site_secret);
    expect(rotated).toEqual({ site_id: site.id, site_secret: expect.stringMatching(/^sitesec_/), previous_expires_at: expect.any(String) });
    expect(rotated.site_secret).not.toBe(site.site_secret);
    const expires = Date.parse(rotated.previous_expires_at);
    expect(expires - before).toBeGreaterThanOrEqual(2 * 3_600_000 - 1_000);
    expect(expires - before).toBeLessThan(2 * 3_600_000 + 60_000);
    // The site shows the grace period, never a secret.
    const shown = await as(ownerA).get(`/api/console/sites/${site.id}`);
    expect(shown.json().previous_secret).toEqual({ expires_at: rotated.previous_expires_at });
    expect(shown.body).not.toContain(rotated.site_secret);
    expect(shown.body).not.toContain(site.site_secret);
    // Both secrets verify during the grace period; a made-up one does not.
    expect((await initAs(site.id, rotated.site_secret)).json().auth_level).toBe('verified');
    expect((await initAs(site.id, site.site_secret)).json().auth_level).toBe('verified');
    const forged = await initAs(site.id, 'sitesec_not-the-secret');
    expect([forged.statusCode, forged.json().error]).toEqual([403, 'identity_verification_failed']);
    // The audit log names who rotated which site, from where.
    const events = (await as(ownerA).get('/api/console/audit-events?action=site.secret_rotated')).json().events;
    expect(events[0]).toMatchObject({ action: 'site.secret_rotated', actor: { type: 'user', id: ownerA.userId, email: 'owner-a@example.com' }, target: { type: 'site', id: site.id }, details: { grace_hours: 2 } });
    expect(events[0].ip).toBeTruthy();
    expect(JSON.stringify(events)).not.toContain(rotated.site_secret);
    // Past the grace period (here: a rotation without one) the previous secret no longer verifies.
    const again = (await as(ownerA).post(`/api/console/sites/${site.id}/rotate-secret`, { grace_hours: 0 })).json();
    recordSecret('site secret', again.site_secret);
    expect((await as(ownerA).get(`/api/console/sites/${site.id}`)).json().previous_secret).toBeNull();
    const old = await initAs(site.id, rotated.site_secret);
    expect([old.statusCode, old.json().error]).toEqual([403, 'identity_verification_failed']);
    expect((await initAs(site.id, again.site_secret)).json().auth_level).toBe('verified');
  });

  test('rotate without grace_hours keeps the previous secret for the default 24 hours; at most 720', async () => {
    const site = await createSite(ownerA, agentOfA);
    const res = await as(ownerA).post(`/api/console/sites/${site.id}/rotate-secret`, {});
    expect(res.statusCode).toBe(200);
    recordSecret('site secret', res.json().site_secret);
    expect(Date.parse(res.json().previous_expires_at) - Date.now()).toBeGreaterThan(23.9 * 3_600_000);
    const tooLong = await as(ownerA).post(`/api/console/sites/${site.id}/rotate-secret`, { grace_hours: 721 });
    expect(tooLong.statusCode).toBe(400);
  });

  test('suspend: the widget is refused with 403 site_suspended; resume: it works again', async () => {
    const site = await createSite(ownerA, agentOfA);
    const suspended = await as(ownerA).post(`/api/console/sites/${site.id}/suspend`);
    expect([suspended.statusCode, suspended.json().status]).toEqual([200, 'suspended']);
    const refused = await initAs(site.id);
    expect([refused.statusCode, refused.json().error]).toEqual([403, 'site_suspended']);
    const config = await t.app.inject({ method: 'GET', url: '/api/public/widget/config', headers: { 'x-concierge-site': site.id, origin: SHOP } });
    expect([config.statusCode, config.json().error]).toEqual([403, 'site_suspended']);
    const resumed = await as(ownerA).post(`/api/console/sites/${site.id}/resume`);
    expect([resumed.statusCode, resumed.json().status]).toEqual([200, 'active']);
    expect((await initAs(site.id)).statusCode).toBe(200);
  });

  test("the identity-verification setting is the agent's: the session changes it through PATCH /api/v1/agents/{id}", async () => {
    const site = await createSite(ownerA, agentOfA);
    const agent = (await as(ownerA).get(`/api/v1/agents/${agentOfA}`)).json();
    const triggers = agent.spec.triggers;
    const web = triggers.web_chat;
    const patched = await as(ownerA).patch(`/api/v1/agents/${agentOfA}`, { triggers: { ...triggers, web_chat: { ...web, require_identity_verification: true } } });
    expect(patched.statusCode).toBe(200);
    const anonymousWithId = await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': site.id, origin: SHOP }, payload: { user_context: { external_id: 'user-42' } } });
    expect([anonymousWithId.statusCode, anonymousWithId.json().error]).toEqual([403, 'identity_verification_required']);
    expect((await initAs(site.id, site.site_secret)).json().auth_level).toBe('verified');
    // An agent-role person may read the agent but not change it.
    const refused = await as(agentA).patch(`/api/v1/agents/${agentOfA}`, { triggers: { ...triggers, web_chat: { ...web, require_identity_verification: false } } });
    expect([refused.statusCode, refused.json().error]).toEqual([403, 'insufficient_scope']);
    expect((await as(ownerA).patch(`/api/v1/agents/${agentOfA}`, { triggers })).statusCode).toBe(200);
  });

  test("the admin CLI's operations (no workspace scope) still reach any site, with the CLI's own field names", async () => {
    const site = await createSite(ownerB, agentOfB);
    const { sites } = t.services;
    expect(await sites.setAppearance(site.id, { brand_color: '#0a7', launcher_label: 'Help' })).toEqual({ site_id: site.id, appearance: { brand_color: '#00aa77', position: 'right', launcher_label: 'Help', theme: 'auto', language: 'auto' } });
    expect(await sites.setPageCommands(site.id, ['navigate', ' ', 'navigate'])).toEqual({ site_id: site.id, ui_commands: ['navigate'] });
    await expect(sites.setPageCommands(site.id, ['Not A Name'])).rejects.toThrow(/^commands: /);
    expect(await sites.setOrigins(site.id, ['https://B.example/'])).toEqual({ site_id: site.id, allowed_origins: ['https://b.example'] });
    expect(await sites.setStatus(site.id, 'suspended')).toEqual({ site_id: site.id, status: 'suspended' });
    expect(await sites.show(site.id)).toMatchObject({ site_id: site.id, workspace_id: wsB, status: 'suspended', ui_commands: ['navigate'], allowed_origins: ['https://b.example'] });
    const rotated = await sites.rotateSecret(site.id, 1);
    recordSecret('site secret', rotated.site_secret);
    expect((await as(ownerB).get(`/api/console/sites/${site.id}`)).json()).toMatchObject({ status: 'suspended', previous_secret: { expires_at: rotated.previous_expires_at }, page_commands: ['navigate'] });
  });
});
