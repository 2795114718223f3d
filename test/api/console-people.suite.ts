import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SecretBox } from '../../lib/crypto/secret-box';
import { CLI_CONTEXT } from '../../domain/audit/audit-log';
import { LinkService } from '../../domain/people/links';
import { PeopleService } from '../../domain/people/users';
import { claimFreshInstall, FIRST_OWNER_EMAIL } from '../../bin/start';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { runAdminCli } from '../support/cli';
import { asBrowser, CONSOLE_ORIGIN, PASSWORD, randomAddress, sessionCookie, signedInUser, tokenOf, type Browser } from '../support/console';
import { recordSecret } from '../support/secret-log';

let db: TestDatabase;
let t: TestApp;
let wsA: string;
let wsB: string;
let ownerA: Browser;
let ownerB: Browser;
/** The installation's encryption key: the API's and the admin CLI's. */
const KEY = randomBytes(32).toString('hex');
const cliDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-console-cli-'));

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, config: { PUBLIC_BASE_URL: CONSOLE_ORIGIN }, serviceOptions: { publicBaseUrl: CONSOLE_ORIGIN, box: SecretBox.fromString(KEY) } });
  wsA = await createWorkspace(db.orm, 'Workspace A');
  wsB = await createWorkspace(db.orm, 'Workspace B');
  ownerA = await signedInUser(t.app, t.services, wsA, 'owner', 'owner-a@example.com');
  ownerB = await signedInUser(t.app, t.services, wsB, 'owner', 'owner-b@example.com');
});
afterAll(async () => {
  await t.close();
  await db.drop();
  fs.rmSync(cliDataDir, { recursive: true, force: true });
});

const sql = (text: string, params: unknown[] = []) => db.orm.em.fork().execute(text, params);
const as = (b: Browser) => ({
  get: (url: string) => t.app.inject({ method: 'GET', url, headers: asBrowser(b) }),
  post: (url: string, payload?: object) => t.app.inject({ method: 'POST', url, headers: asBrowser(b), ...(payload ? { payload } : {}) }),
  patch: (url: string, payload: object) => t.app.inject({ method: 'PATCH', url, headers: asBrowser(b), payload }),
  del: (url: string) => t.app.inject({ method: 'DELETE', url, headers: asBrowser(b) }),
});
const admin = (...args: string[]) => runAdminCli(args, { env: { DATABASE_URL: db.url, CONCIERGE_DATA_DIR: cliDataDir, CONCIERGE_ENCRYPTION_KEY: KEY, PUBLIC_BASE_URL: CONSOLE_ORIGIN } });
const kbStatus = async (key: string) => t.app.inject({ method: 'GET', url: '/api/v1/kb/folders', headers: bearer(key) });

/** An invitation accepted through its link: the invited person, signed in. */
async function invite(by: Browser, role: string, email = `${role}-${randomBytes(4).toString('hex')}@example.com`): Promise<Browser> {
  const res = await as(by).post('/api/console/users', { email, role });
  if (res.statusCode !== 201) throw new Error(`invite: ${res.statusCode} ${res.body}`);
  const body = res.json();
  expect(body).toMatchObject({ user: { email, role, status: 'invited' }, link: { kind: 'invitation' }, emailed: false });
  const redeemed = await t.app.inject({ method: 'POST', url: '/api/console/links/redeem', remoteAddress: randomAddress(), headers: { origin: CONSOLE_ORIGIN }, payload: { token: tokenOf(body.link.url), password: PASSWORD, name: 'Invited Person' } });
  expect(redeemed.statusCode).toBe(200);
  const cookie = sessionCookie(redeemed)!;
  recordSecret('session token', cookie);
  return { cookie, csrf: redeemed.json().csrf_token, userId: body.user.id, email };
}

describe('people and roles', () => {
  test('an owner invites; the invitation link sets the name and password and signs in; the act is audited', async () => {
    const person = await invite(ownerA, 'admin', 'new-admin@example.com');
    const listed = (await as(ownerA).get('/api/console/users')).json().users;
    expect(listed.find((u: { id: string }) => u.id === person.userId)).toMatchObject({ email: 'new-admin@example.com', name: 'Invited Person', role: 'admin', status: 'active' });
    expect((await as(ownerA).post('/api/console/users', { email: 'NEW-ADMIN@example.com', role: 'viewer' })).json().error).toBe('email_taken');
    const events = (await as(ownerA).get('/api/console/audit-events?action=user.invited')).json().events;
    expect(events[0]).toMatchObject({ actor: { type: 'user', id: ownerA.userId, email: 'owner-a@example.com' }, target: { type: 'user', id: person.userId } });
    expect(events[0].ip).toBeTruthy();
  });

  test('only an owner grants, takes or touches the owner role', async () => {
    const adminUser = await invite(ownerA, 'admin');
    const refused = await as(adminUser).post('/api/console/users', { email: 'would-be-owner@example.com', role: 'owner' });
    expect(refused.statusCode).toBe(403);
    const viewer = await invite(adminUser, 'viewer');
    expect((await as(adminUser).patch(`/api/console/users/${viewer.userId}`, { role: 'owner' })).statusCode).toBe(403);
    expect((await as(adminUser).patch(`/api/console/users/${ownerA.userId}`, { role: 'viewer' })).statusCode).toBe(403);
    expect((await as(adminUser).del(`/api/console/users/${ownerA.userId}`)).statusCode).toBe(403);
    // An admin manages the others.
    const changed = await as(adminUser).patch(`/api/console/users/${viewer.userId}`, { role: 'agent' });
    expect(changed.statusCode).toBe(200);
    expect(changed.json().role).toBe('agent');
    // The role takes effect on the next request: the scopes come from the role, not from the session.
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/conversations', headers: { cookie: `concierge_session=${viewer.cookie}` } })).statusCode).toBe(200);
    const promoted = await as(ownerA).patch(`/api/console/users/${viewer.userId}`, { role: 'owner' });
    expect(promoted.json().role).toBe('owner');
    const audit = (await as(ownerA).get('/api/console/audit-events?action=user.role_changed')).json().events;
    expect(audit[0].details).toMatchObject({ from: 'agent', to: 'owner' });
    // Back down, by an owner.
    expect((await as(ownerA).patch(`/api/console/users/${viewer.userId}`, { role: 'viewer' })).statusCode).toBe(200);
  });

  test('agents and viewers manage nobody', async () => {
    const agent = await invite(ownerA, 'agent');
    expect((await as(agent).post('/api/console/users', { email: 'x@example.com', role: 'viewer' })).statusCode).toBe(403);
    expect((await as(agent).del(`/api/console/users/${ownerA.userId}`)).statusCode).toBe(403);
  });

  test('the last owner can be neither demoted nor removed; with a second owner, either can', async () => {
    const ws = await createWorkspace(db.orm, 'Solo');
    const solo = await signedInUser(t.app, t.services, ws, 'owner');
    const demote = await as(solo).patch(`/api/console/users/${solo.userId}`, { role: 'admin' });
    expect(demote.statusCode).toBe(409);
    expect(demote.json().error).toBe('last_owner');
    expect((await as(solo).del(`/api/console/users/${solo.userId}`)).json().error).toBe('last_owner');
    const second = await invite(solo, 'owner');
    expect((await as(second).patch(`/api/console/users/${solo.userId}`, { role: 'admin' })).statusCode).toBe(200);
    // Now `second` is the last owner.
    expect((await as(second).del(`/api/console/users/${second.userId}`)).json().error).toBe('last_owner');
    // Two owners demoting each other at once: one succeeds, one is refused; never zero owners.
    expect((await as(second).patch(`/api/console/users/${solo.userId}`, { role: 'owner' })).statusCode).toBe(200);
    const [x, y] = await Promise.all([as(solo).patch(`/api/console/users/${second.userId}`, { role: 'viewer' }), as(second).patch(`/api/console/users/${solo.userId}`, { role: 'viewer' })]);
    expect([x.statusCode, y.statusCode].sort()).toEqual([200, 409]);
    const owners = await sql(`select count(*)::int as n from console_users where workspace_id = ? and role = 'owner'`, [ws]);
    expect(owners[0].n).toBe(1);
  });

  test('a removed user is signed out at once', async () => {
    const viewer = await invite(ownerA, 'viewer');
    expect((await as(ownerA).del(`/api/console/users/${viewer.userId}`)).statusCode).toBe(204);
    expect((await t.app.inject({ method: 'GET', url: '/api/console/session', headers: { cookie: `concierge_session=${viewer.cookie}` } })).statusCode).toBe(401);
  });
});

describe('two workspaces: a user of A gets nothing of B by any id', () => {
  test('users, keys and audit events of B are not found from A', async () => {
    const bUser = await invite(ownerB, 'viewer');
    const bKey = (await as(ownerB).post('/api/console/keys', { name: 'B key' })).json();
    expect((await as(ownerA).patch(`/api/console/users/${bUser.userId}`, { role: 'admin' })).statusCode).toBe(404);
    expect((await as(ownerA).del(`/api/console/users/${bUser.userId}`)).statusCode).toBe(404);
    expect((await as(ownerA).post(`/api/console/users/${bUser.userId}/link`)).statusCode).toBe(404);
    for (const action of ['copy', 'rotate']) expect((await as(ownerA).post(`/api/console/keys/${bKey.id}/${action}`)).statusCode).toBe(404);
    expect((await as(ownerA).del(`/api/console/keys/${bKey.id}`)).statusCode).toBe(404);
    const aUsers = (await as(ownerA).get('/api/console/users')).json().users.map((u: { id: string }) => u.id);
    expect(aUsers).not.toContain(bUser.userId);
    expect((await as(ownerA).get('/api/console/keys')).json().keys.map((k: { id: string }) => k.id)).not.toContain(bKey.id);
    const aEvents = JSON.stringify((await as(ownerA).get('/api/console/audit-events?limit=200')).json());
    expect(aEvents).not.toContain(bUser.userId);
    expect(aEvents).not.toContain(bKey.id);
    expect(aEvents).not.toContain(ownerB.userId);
    // B's key still works: nothing from A touched it.
    expect((await kbStatus(bKey.key)).statusCode).toBe(200);
  });
});

describe('the key console', () => {
  test('create shows the value once; the list has the prefix and no value; copy returns it and is audited', async () => {
    const scopes = (await as(ownerA).get('/api/console/key-scopes')).json().scopes;
    expect(scopes.filter((s: { default: boolean }) => s.default).map((s: { scope: string }) => s.scope).sort()).toEqual(['documents:extract', 'kb:read', 'kb:write', 'memory:write']);
    const created = await as(ownerA).post('/api/console/keys', { name: 'Production backend' });
    expect(created.statusCode).toBe(201);
    const key = created.json();
    expect(key.key).toMatch(/^sk_[0-9a-f]{64}$/);
    expect(key).toMatchObject({ prefix: key.key.slice(0, 11), copyable: true, scopes: ['documents:extract', 'kb:read', 'kb:write', 'memory:write'] });
    const list = await as(ownerA).get('/api/console/keys');
    expect(list.body).not.toContain(key.key);
    expect(list.body).not.toContain(key.key.slice(11));
    expect(list.json().keys.find((k: { id: string }) => k.id === key.id)).toMatchObject({ prefix: key.prefix, copyable: true, last_used_at: null });
    // Stored sealed: neither the value nor its tail is in the row.
    const row = (await sql('select * from api_keys where id = ?', [key.id]))[0];
    expect(JSON.stringify(row)).not.toContain(key.key.slice(11));
    const copied = await as(ownerA).post(`/api/console/keys/${key.id}/copy`);
    expect(copied.statusCode).toBe(200);
    expect(copied.json()).toEqual({ id: key.id, key: key.key });
    const audit = (await as(ownerA).get('/api/console/audit-events?action=key.copied')).json().events;
    expect(audit[0]).toMatchObject({ actor: { type: 'user', id: ownerA.userId }, target: { type: 'api_key', id: key.id } });
    // Used: last_used_at is recorded (once a minute at most, not awaited by the request).
    expect((await kbStatus(key.key)).statusCode).toBe(200);
    for (let i = 0; i < 50 && !(await sql('select last_used_at from api_keys where id = ?', [key.id]))[0].last_used_at; i++) await new Promise((r) => setTimeout(r, 20));
    expect((await as(ownerA).get('/api/console/keys')).json().keys.find((k: { id: string }) => k.id === key.id).last_used_at).not.toBeNull();
  });

  test('a key made by the admin CLI is copyable from the console, and audited as the CLI', async () => {
    const res = await admin('key', 'create', '--workspace', wsA, '--name', 'from the cli', '--scopes', 'kb:read');
    expect(res.code).toBe(0);
    const made = JSON.parse(res.stdout);
    recordSecret('api key', made.key);
    const copied = await as(ownerA).post(`/api/console/keys/${made.id}/copy`);
    expect(copied.json().key).toBe(made.key);
    const events = (await as(ownerA).get('/api/console/audit-events?action=key.created')).json().events;
    expect(events.find((e: { target: { id: string } }) => e.target.id === made.id)).toMatchObject({ actor: { type: 'cli', id: null } });
    const rotated = JSON.parse((await admin('key', 'rotate', made.id)).stdout);
    recordSecret('api key', rotated.key);
    expect((await as(ownerA).post(`/api/console/keys/${made.id}/copy`)).json().key).toBe(rotated.key);
  });

  test('a key from before sealing is not copyable until rotated', async () => {
    const made = (await as(ownerA).post('/api/console/keys', { name: 'legacy', scopes: ['kb:read'] })).json();
    await sql('update api_keys set sealed_value = null where id = ?', [made.id]);
    expect((await as(ownerA).get('/api/console/keys')).json().keys.find((k: { id: string }) => k.id === made.id).copyable).toBe(false);
    const refused = await as(ownerA).post(`/api/console/keys/${made.id}/copy`);
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error).toBe('key_not_copyable');
    const rotated = (await as(ownerA).post(`/api/console/keys/${made.id}/rotate`)).json();
    expect(rotated.copyable).toBe(true);
    expect((await as(ownerA).post(`/api/console/keys/${made.id}/copy`)).json().key).toBe(rotated.key);
  });

  test('rotate: the old value answers 401 revoked_api_key at once; delete: so does the key', async () => {
    const made = (await as(ownerA).post('/api/console/keys', { name: 'to rotate', scopes: ['kb:read'] })).json();
    expect((await kbStatus(made.key)).statusCode).toBe(200);
    const rotated = await as(ownerA).post(`/api/console/keys/${made.id}/rotate`);
    expect(rotated.statusCode).toBe(200);
    const old = await kbStatus(made.key);
    expect(old.statusCode).toBe(401);
    expect(old.json().error).toBe('revoked_api_key');
    expect((await kbStatus(rotated.json().key)).statusCode).toBe(200);
    expect((await as(ownerA).del(`/api/console/keys/${made.id}`)).statusCode).toBe(204);
    const gone = await kbStatus(rotated.json().key);
    expect(gone.statusCode).toBe(401);
    expect(gone.json().error).toBe('revoked_api_key');
    expect((await as(ownerA).post(`/api/console/keys/${made.id}/copy`)).json().error).toBe('key_revoked');
    const actions = (await as(ownerA).get('/api/console/audit-events?limit=200')).json().events.filter((e: { target: { id: string } | null }) => e.target?.id === made.id).map((e: { action: string }) => e.action);
    expect(actions).toEqual(['key.deleted', 'key.rotated', 'key.created']);
  });
});

describe('the audit log', () => {
  test('refuses UPDATE, DELETE and TRUNCATE in the database itself', async () => {
    const before = (await sql('select count(*)::int as n from audit_events'))[0].n;
    expect(before).toBeGreaterThan(0);
    await expect(sql(`update audit_events set action = 'tampered'`)).rejects.toThrow(/append-only/);
    await expect(sql(`delete from audit_events`)).rejects.toThrow(/append-only/);
    await expect(sql(`truncate audit_events`)).rejects.toThrow(/append-only/);
    expect((await sql('select count(*)::int as n from audit_events'))[0].n).toBe(before);
    expect((await sql(`select count(*)::int as n from audit_events where action = 'tampered'`))[0].n).toBe(0);
  });

  test('records a credential added with its principal (never the secret), and the CLI\'s acts as cli', async () => {
    const added = await as(ownerA).post('/api/v1/credentials', { name: 'Main number', provider: 'msgapp', access_token: 'EAAG-test-token-value-0001' });
    expect(added.statusCode).toBe(201);
    const credEvents = (await as(ownerA).get('/api/console/audit-events?action=credential.added')).json().events;
    expect(credEvents[0]).toMatchObject({ actor: { type: 'user', id: ownerA.userId }, target: { type: 'credential', id: added.json().id }, details: { provider: 'msgapp' } });
    expect(JSON.stringify(credEvents)).not.toContain('EAAG-test-token-value-0001');

    const userRes = await admin('user', 'create', '--workspace', wsA, '--email', 'cli-made@example.com', '--role', 'viewer');
    expect(userRes.code).toBe(0);
    const made = JSON.parse(userRes.stdout);
    expect(made).toMatchObject({ email: 'cli-made@example.com', role: 'viewer', status: 'invited', workspace_id: wsA });
    expect(made.sign_in_url).toMatch(new RegExp(`^${CONSOLE_ORIGIN}/console/link#token=[A-Za-z0-9_-]{43}$`));
    const hours = (Date.parse(made.sign_in_url_expires_at) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(23.9);
    const created = (await as(ownerA).get('/api/console/audit-events?action=user.created')).json().events;
    expect(created[0]).toMatchObject({ actor: { type: 'cli' }, target: { id: made.id } });
  });
});

describe('the audit log, across the domain', () => {
  test('a webhook secret rotated by a session and a site secret rotated by the CLI are recorded with who did it', async () => {
    const sub = await as(ownerA).post('/api/v1/webhook-subscriptions', { url: 'https://127.0.0.1:9/hooks', events: ['message.status'] });
    expect(sub.statusCode).toBe(201);
    recordSecret('webhook secret', sub.json().secret);
    const rotated = await as(ownerA).patch(`/api/v1/webhook-subscriptions/${sub.json().id}`, { rotate_secret: true });
    expect(rotated.statusCode).toBe(200);
    recordSecret('webhook secret', rotated.json().secret);
    const hook = (await as(ownerA).get('/api/console/audit-events?action=webhook_subscription.secret_rotated')).json().events;
    expect(hook[0]).toMatchObject({ actor: { type: 'user', id: ownerA.userId }, target: { type: 'webhook_subscription', id: sub.json().id } });
    expect(JSON.stringify(hook)).not.toContain(rotated.json().secret);

    const agent = await t.services.agents.create(wsA, { name: 'Site agent' });
    const site = await t.services.sites.create(wsA, agent.id, ['https://shop.example']);
    recordSecret('site secret', site.site_secret);
    const res = await admin('site', 'rotate-secret', site.site_id);
    expect(res.code).toBe(0);
    recordSecret('site secret', JSON.parse(res.stdout).site_secret);
    const siteEvents = (await as(ownerA).get('/api/console/audit-events?action=site.secret_rotated')).json().events;
    expect(siteEvents[0]).toMatchObject({ actor: { type: 'cli' }, target: { type: 'site', id: site.site_id } });
  });
});

describe('claiming a fresh install', () => {
  test("npm start's first owner: a sign-in link while nobody has signed in, a new one (the old one dead) each start, none after", async () => {
    const ws = await createWorkspace(db.orm, 'Fresh');
    const first = await t.services.people.claimLink(ws, FIRST_OWNER_EMAIL, CLI_CONTEXT);
    expect(first).toMatchObject({ user: { email: 'owner@localhost', role: 'owner', status: 'invited' }, link: { kind: 'sign_in' } });
    const again = await t.services.people.claimLink(ws, FIRST_OWNER_EMAIL, CLI_CONTEXT);
    expect(again!.user.id).toBe(first!.user.id);
    expect(again!.link.url).not.toBe(first!.link.url);
    const redeem = (url: string) => t.app.inject({ method: 'POST', url: '/api/console/links/redeem', remoteAddress: randomAddress(), headers: { origin: CONSOLE_ORIGIN }, payload: { token: tokenOf(url), password: PASSWORD } });
    expect((await redeem(first!.link.url)).statusCode).toBe(410);
    expect((await redeem(again!.link.url)).statusCode).toBe(200);
    expect(await t.services.people.claimLink(ws, FIRST_OWNER_EMAIL, CLI_CONTEXT)).toBeNull();
    // The start-up step itself: the oldest workspace (A) has signed-in users, so nothing is printed.
    expect(await claimFreshInstall(t.composition)).toBeNull();
  });
});

describe('mail', () => {
  test('with SMTP set up, an invitation and a password reset are mailed; the reset answers the same for any email', async () => {
    const sent: Array<{ to: string; subject: string; text: string }> = [];
    const people = new PeopleService(t.composition.em, t.services.sessions, new LinkService(CONSOLE_ORIGIN), { mailer: { send: async (m) => void sent.push(m) } });
    const invited = await people.create({ cli: true }, wsA, { email: 'mailed@example.com', role: 'agent' }, CLI_CONTEXT, 'invitation');
    expect(invited.emailed).toBe(true);
    expect(sent[0]).toMatchObject({ to: 'mailed@example.com' });
    expect(sent[0].text).toContain(invited.link.url);
    const guard = { admit: async () => undefined };
    await people.requestPasswordReset('nobody-here@example.com', {}, guard);
    expect(sent).toHaveLength(1);
    await people.requestPasswordReset('owner-a@example.com', {}, guard);
    await new Promise((r) => setTimeout(r, 50));
    expect(sent).toHaveLength(2);
    expect(sent[1].to).toBe('owner-a@example.com');
    expect(sent[1].text).toMatch(new RegExp(`${CONSOLE_ORIGIN}/console/link#token=`));
    // A refused mail is not a refused invitation: the link is still returned.
    const failing = new PeopleService(t.composition.em, t.services.sessions, new LinkService(CONSOLE_ORIGIN), { mailer: { send: async () => Promise.reject(new Error('550 no')) } });
    const res = await failing.create({ cli: true }, wsA, { email: 'bounced@example.com', role: 'viewer' }, CLI_CONTEXT, 'invitation');
    expect(res.emailed).toBe(false);
    expect(res.link.url).toMatch(/#token=/);
  });
});
