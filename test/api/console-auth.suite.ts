import { CLI_CONTEXT } from '../../domain/audit/audit-log';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { asBrowser, CONSOLE_ORIGIN, PASSWORD, sessionCookie, signedInUser, signIn, tokenOf, type Browser } from '../support/console';

let db: TestDatabase;
let t: TestApp;
let ws: string;
let owner: Browser;

const FAILURES_PER_ACCOUNT = 3;
const ATTEMPTS_PER_ADDRESS = 12;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    config: {
      PUBLIC_BASE_URL: CONSOLE_ORIGIN,
      CONSOLE_SIGNIN_FAILURES_PER_ACCOUNT: FAILURES_PER_ACCOUNT,
      CONSOLE_SIGNIN_ATTEMPTS_PER_ADDRESS: ATTEMPTS_PER_ADDRESS,
      CONSOLE_SIGNIN_WINDOW_SECONDS: 600,
      CONSOLE_SESSION_IDLE_MINUTES: 30,
      CONSOLE_SESSION_ABSOLUTE_HOURS: 8,
    },
    serviceOptions: { publicBaseUrl: CONSOLE_ORIGIN },
  });
  ws = await createWorkspace(db.orm);
  owner = await signedInUser(t.app, t.services, ws, 'owner', 'owner@example.com');
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

/** Each test signs in from its own client address, so the per-address budget of one does not spill into another. */
let lastAddress = 10;
const nextAddress = () => `10.0.0.${++lastAddress}`;

const sql = (text: string, params: unknown[] = []) => db.orm.em.fork().execute(text, params);
const getSession = (b: Pick<Browser, 'cookie'>) => t.app.inject({ method: 'GET', url: '/api/console/session', headers: { cookie: `concierge_session=${b.cookie}` } });

describe('password sign-in', () => {
  test('the right password signs in: a session cookie (HttpOnly, SameSite=Lax, Secure behind https, Path=/) and its CSRF token', async () => {
    const res = await signIn(t.app, 'OWNER@example.com', PASSWORD, { remoteAddress: nextAddress() });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.user).toMatchObject({ email: 'owner@example.com', role: 'owner', status: 'active' });
    expect(body.workspace.id).toBe(ws);
    expect(body.csrf_token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(body.scopes).toContain('credentials:write');
    const cookie = res.cookies.find((c) => c.name === 'concierge_session')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', secure: true, path: '/' });
    expect(cookie.maxAge).toBeGreaterThan(7 * 3600);
    expect(cookie.maxAge).toBeLessThanOrEqual(8 * 3600);
    // Only the token's hash is stored.
    const rows = await sql('select token_hash from console_sessions where user_id = ?', [owner.userId]);
    expect(rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(rows)).not.toContain(cookie.value);
    expect((await getSession({ cookie: cookie.value })).json().user.id).toBe(owner.userId);
  });

  test('a wrong password and an unknown email get the same 401, and both are audited as failures', async () => {
    const address = nextAddress();
    const wrong = await signIn(t.app, 'owner@example.com', 'not the password at all', { remoteAddress: address });
    const unknown = await signIn(t.app, 'nobody@example.com', 'not the password at all', { remoteAddress: address });
    expect(wrong.statusCode).toBe(401);
    expect(unknown.statusCode).toBe(401);
    expect(wrong.json()).toEqual(unknown.json());
    expect(wrong.json().error).toBe('invalid_credentials');
    expect(sessionCookie(wrong)).toBeUndefined();
    const failures = await sql(`select actor_email, workspace_id from audit_events where action = 'user.sign_in_failed' order by created_at`);
    expect(failures.map((f) => f.actor_email)).toEqual(expect.arrayContaining(['owner@example.com', 'nobody@example.com']));
    // Both paths verify an argon2 hash: neither answers in a fraction of the other's time (the faster of two runs
    // each, so a pause of a loaded machine does not decide it; a user of its own, below its lockout).
    const timed = await signedInUser(t.app, t.services, ws, 'viewer', 'timed@example.com');
    const time = async (email: string) => {
      const start = process.hrtime.bigint();
      const res = await signIn(t.app, email, 'still not the password', { remoteAddress: nextAddress() });
      expect(res.statusCode).toBe(401);
      return Number(process.hrtime.bigint() - start) / 1e6;
    };
    const known = Math.min(await time(timed.email), await time(timed.email));
    const nobody = Math.min(await time('nobody-else@example.com'), await time('nobody-at-all@example.com'));
    expect(nobody).toBeGreaterThan(known / 4);
    expect(known).toBeGreaterThan(nobody / 4);
  });

  test('repeated failures lock the account: 429 with Retry-After, even with the right password, from any address', async () => {
    const user = await signedInUser(t.app, t.services, ws, 'viewer', 'locked@example.com');
    for (let i = 0; i < FAILURES_PER_ACCOUNT; i++) expect((await signIn(t.app, user.email, 'wrong password number ' + i, { remoteAddress: nextAddress() })).statusCode).toBe(401);
    const locked = await signIn(t.app, user.email, PASSWORD, { remoteAddress: nextAddress() });
    expect(locked.statusCode).toBe(429);
    expect(locked.json().error).toBe('rate_limited');
    expect(Number(locked.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(locked.headers['retry-after'])).toBeLessThanOrEqual(600);
    // An unknown email is locked the same way: the lockout tells nothing about who has an account.
    for (let i = 0; i < FAILURES_PER_ACCOUNT; i++) await signIn(t.app, 'ghost@example.com', 'wrong password number ' + i, { remoteAddress: nextAddress() });
    expect((await signIn(t.app, 'ghost@example.com', 'wrong password', { remoteAddress: nextAddress() })).statusCode).toBe(429);
  });

  test('too many attempts from one address: 429 with Retry-After', async () => {
    const address = nextAddress();
    const statuses: number[] = [];
    for (let i = 0; i <= ATTEMPTS_PER_ADDRESS; i++) statuses.push((await signIn(t.app, `someone-${i}@example.com`, 'wrong password here', { remoteAddress: address })).statusCode);
    expect(statuses.slice(0, ATTEMPTS_PER_ADDRESS).every((s) => s === 401)).toBe(true);
    const limited = await signIn(t.app, 'owner@example.com', PASSWORD, { remoteAddress: address });
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  });

  test('sign-in from another origin is refused (login CSRF)', async () => {
    const res = await signIn(t.app, 'owner@example.com', PASSWORD, { remoteAddress: nextAddress(), headers: { origin: 'https://evil.example' } });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('csrf_failed');
  });

  test('fixation: a cookie the browser had before sign-in is never the one after, and its session ends', async () => {
    const planted = 'A'.repeat(43);
    const res = await signIn(t.app, 'owner@example.com', PASSWORD, { remoteAddress: nextAddress(), headers: { cookie: `concierge_session=${planted}` } });
    expect(res.statusCode).toBe(200);
    expect(sessionCookie(res)).not.toBe(planted);
    // A real earlier session presented at sign-in is ended, not reused.
    const before = await signIn(t.app, 'owner@example.com', PASSWORD, { remoteAddress: nextAddress() });
    const earlier = sessionCookie(before)!;
    const after = await signIn(t.app, 'owner@example.com', PASSWORD, { remoteAddress: nextAddress(), headers: { cookie: `concierge_session=${earlier}` } });
    expect(sessionCookie(after)).not.toBe(earlier);
    expect((await getSession({ cookie: earlier })).statusCode).toBe(401);
    expect((await getSession({ cookie: sessionCookie(after)! })).statusCode).toBe(200);
  });
});

describe('sessions', () => {
  test('idle expiry: a session unused for longer than the idle lifetime is over', async () => {
    const user = await signedInUser(t.app, t.services, ws, 'viewer');
    expect((await getSession(user)).statusCode).toBe(200);
    await sql(`update console_sessions s set last_seen_at = now() - interval '31 minutes' from console_users u where u.id = s.user_id and u.id = ?`, [user.userId]);
    const res = await getSession(user);
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('not_signed_in');
  });

  test('absolute expiry: a session past its end is over, however recently used', async () => {
    const user = await signedInUser(t.app, t.services, ws, 'viewer');
    await sql(`update console_sessions set expires_at = now() - interval '1 second', last_seen_at = now() where user_id = ?`, [user.userId]);
    expect((await getSession(user)).statusCode).toBe(401);
  });

  test('sign out ends this session; sign out everywhere ends every session of the user and is audited', async () => {
    const a = await signedInUser(t.app, t.services, ws, 'agent');
    const again = await signIn(t.app, a.email, PASSWORD, { remoteAddress: nextAddress() });
    const b: Browser = { ...a, cookie: sessionCookie(again)!, csrf: again.json().csrf_token };
    const third = await signIn(t.app, a.email, PASSWORD, { remoteAddress: nextAddress() });
    const c: Browser = { ...a, cookie: sessionCookie(third)!, csrf: third.json().csrf_token };

    const out = await t.app.inject({ method: 'POST', url: '/api/console/sign-out', headers: asBrowser(c) });
    expect(out.statusCode).toBe(204);
    expect(out.cookies.find((x) => x.name === 'concierge_session')?.value).toBe('');
    expect((await getSession(c)).statusCode).toBe(401);
    expect((await getSession(a)).statusCode).toBe(200);

    const everywhere = await t.app.inject({ method: 'POST', url: '/api/console/sign-out-everywhere', headers: asBrowser(b) });
    expect(everywhere.statusCode).toBe(204);
    expect((await getSession(a)).statusCode).toBe(401);
    expect((await getSession(b)).statusCode).toBe(401);
    const events = await sql(`select actor_id, ip from audit_events where action = 'user.signed_out_everywhere' and actor_id = ?`, [a.userId]);
    expect(events).toHaveLength(1);
  });
});

describe('CSRF', () => {
  test('an unsafe request with a session is refused without the token, with a wrong one, and from another origin', async () => {
    const user = await signedInUser(t.app, t.services, ws, 'admin');
    const url = '/api/console/keys';
    const payload = { name: 'csrf test' };
    const without = await t.app.inject({ method: 'POST', url, payload, headers: { cookie: `concierge_session=${user.cookie}`, origin: CONSOLE_ORIGIN } });
    expect(without.statusCode).toBe(403);
    expect(without.json().error).toBe('csrf_failed');
    const wrong = await t.app.inject({ method: 'POST', url, payload, headers: asBrowser(user, { 'x-csrf-token': owner.csrf }) });
    expect(wrong.statusCode).toBe(403);
    const foreign = await t.app.inject({ method: 'POST', url, payload, headers: asBrowser(user, { origin: 'https://evil.example' }) });
    expect(foreign.statusCode).toBe(403);
    expect(foreign.json().error).toBe('csrf_failed');
    const crossSite = await t.app.inject({ method: 'POST', url, payload, headers: { cookie: `concierge_session=${user.cookie}`, 'x-csrf-token': user.csrf, 'sec-fetch-site': 'cross-site' } });
    expect(crossSite.statusCode).toBe(403);
    // The same session's /api/v1 calls are held to the same rule.
    const api = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', payload: { name: 'No token' }, headers: { cookie: `concierge_session=${user.cookie}`, origin: CONSOLE_ORIGIN } });
    expect(api.statusCode).toBe(403);
    expect(api.json().error).toBe('csrf_failed');
    const ok = await t.app.inject({ method: 'POST', url, payload, headers: asBrowser(user) });
    expect(ok.statusCode).toBe(201);
  });
});

describe('API keys and sessions: each where it belongs', () => {
  test('an sk_ key gets 401 on /api/console/*, whatever its scopes', async () => {
    const { key } = await createKey(t.services, ws, ['kb:read', 'credentials:read', 'webhooks:read']);
    for (const url of ['/api/console/users', '/api/console/keys', '/api/console/audit-events', '/api/console/session']) {
      const res = await t.app.inject({ method: 'GET', url, headers: bearer(key) });
      expect({ url, status: res.statusCode, error: res.json().error }).toEqual({ url, status: 401, error: 'not_signed_in' });
    }
    // A key beside a session cookie does not open the console either.
    const both = await t.app.inject({ method: 'GET', url: '/api/console/users', headers: { ...bearer(key), cookie: `concierge_session=${owner.cookie}` } });
    expect(both.statusCode).toBe(401);
  });

  test("a session calls /api/v1 with its role's scopes, and gets 403 insufficient_scope outside them", async () => {
    const viewer = await signedInUser(t.app, t.services, ws, 'viewer');
    const agent = await signedInUser(t.app, t.services, ws, 'agent');
    const admin = await signedInUser(t.app, t.services, ws, 'admin');
    const read = await t.app.inject({ method: 'GET', url: '/api/v1/kb/folders', headers: { cookie: `concierge_session=${viewer.cookie}` } });
    expect(read.statusCode).toBe(200);
    // Counted per user, as a key's requests are per key.
    expect(read.headers['x-ratelimit-limit']).toBeDefined();
    const write = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', payload: { name: 'Viewer folder' }, headers: asBrowser(viewer) });
    expect(write.statusCode).toBe(403);
    expect(write.json()).toMatchObject({ error: 'insufficient_scope', required_scope: 'kb:write' });
    const credentials = await t.app.inject({ method: 'GET', url: '/api/v1/credentials', headers: { cookie: `concierge_session=${agent.cookie}` } });
    expect(credentials.statusCode).toBe(403);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/conversations', headers: { cookie: `concierge_session=${agent.cookie}` } })).statusCode).toBe(200);
    const made = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', payload: { name: 'Admin folder' }, headers: asBrowser(admin) });
    expect(made.statusCode).toBe(201);
    // An expired session on /api/v1 is 401, not a fall-through to "no key".
    await sql(`update console_sessions set revoked_at = now() where user_id = ?`, [viewer.userId]);
    const gone = await t.app.inject({ method: 'GET', url: '/api/v1/kb/folders', headers: { cookie: `concierge_session=${viewer.cookie}` } });
    expect(gone.statusCode).toBe(401);
    expect(gone.json().error).toBe('not_signed_in');
  });

  test('the console role table follows the contract: agent and viewer cannot reach keys, people or the audit log', async () => {
    for (const role of ['agent', 'viewer'] as const) {
      const user = await signedInUser(t.app, t.services, ws, role);
      for (const url of ['/api/console/users', '/api/console/keys', '/api/console/audit-events']) {
        const res = await t.app.inject({ method: 'GET', url, headers: { cookie: `concierge_session=${user.cookie}` } });
        expect({ role, url, status: res.statusCode }).toEqual({ role, url, status: 403 });
      }
      expect((await getSession(user)).json().user.role).toBe(role);
    }
  });
});

describe('one-time links', () => {
  const redeem = (token: string, password = 'a long and unusual passphrase') =>
    t.app.inject({ method: 'POST', url: '/api/console/links/redeem', remoteAddress: nextAddress(), headers: { origin: CONSOLE_ORIGIN }, payload: { token, password } });

  test('a sign-in link works once, and lives 24 hours', async () => {
    const made = await t.services.people.create({ cli: true }, ws, { email: 'once@example.com', role: 'agent' }, CLI_CONTEXT, 'sign_in');
    const hours = (Date.parse(made.link.expires_at) - Date.now()) / 3_600_000;
    expect(hours).toBeGreaterThan(23.9);
    expect(hours).toBeLessThanOrEqual(24);
    const token = tokenOf(made.link.url);
    expect(made.link.url.startsWith(`${CONSOLE_ORIGIN}/console/link#token=`)).toBe(true);
    // Only the hash is stored.
    expect(JSON.stringify(await sql('select * from console_links where user_id = ?', [made.user.id]))).not.toContain(token);
    const info = await t.app.inject({ method: 'POST', url: '/api/console/links/inspect', headers: { origin: CONSOLE_ORIGIN }, payload: { token } });
    expect(info.json()).toMatchObject({ kind: 'sign_in', email: 'once@example.com', password_set: false });
    const first = await redeem(token);
    expect(first.statusCode).toBe(200);
    expect(sessionCookie(first)).toBeDefined();
    const second = await redeem(token);
    expect(second.statusCode).toBe(410);
    expect(second.json().error).toBe('link_expired');
    expect((await redeem('B'.repeat(43))).json().error).toBe('link_not_found');
  });

  test('an expired link is refused', async () => {
    const made = await t.services.people.create({ cli: true }, ws, { email: 'late@example.com', role: 'viewer' }, CLI_CONTEXT, 'sign_in');
    await sql(`update console_links set expires_at = now() - interval '1 second' where user_id = ?`, [made.user.id]);
    const res = await redeem(tokenOf(made.link.url));
    expect(res.statusCode).toBe(410);
  });

  test('two redemptions racing: exactly one wins', async () => {
    const made = await t.services.people.create({ cli: true }, ws, { email: 'race@example.com', role: 'viewer' }, CLI_CONTEXT, 'sign_in');
    const token = tokenOf(made.link.url);
    const results = await Promise.all([redeem(token), redeem(token), redeem(token)]);
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 410, 410]);
  });

  test('a weak password is refused, and the link stays usable', async () => {
    const made = await t.services.people.create({ cli: true }, ws, { email: 'weak@example.com', role: 'viewer' }, CLI_CONTEXT, 'sign_in');
    const token = tokenOf(made.link.url);
    const short = await redeem(token, 'short pass');
    expect(short.statusCode).toBe(400);
    const common = await redeem(token, 'qwertyqwerty');
    expect(common.statusCode).toBe(400);
    expect(common.json().error).toBe('weak_password');
    const email = await redeem(token, 'weak@example.com');
    expect(email.json().error).toBe('weak_password');
    expect((await redeem(token)).statusCode).toBe(200);
  });

  test('password reset: 202 whatever the email; the link lives an hour, sets a new password and ends the other sessions', async () => {
    const user = await signedInUser(t.app, t.services, ws, 'agent', 'reset@example.com');
    for (const email of ['reset@example.com', 'no-such-user@example.com']) {
      const res = await t.app.inject({ method: 'POST', url: '/api/console/password-reset', remoteAddress: nextAddress(), headers: { origin: CONSOLE_ORIGIN }, payload: { email } });
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ accepted: true });
    }
    // No SMTP here: an owner issues the link (a reset, since the user has a password).
    const issued = await t.app.inject({ method: 'POST', url: `/api/console/users/${user.userId}/link`, headers: asBrowser(owner) });
    expect(issued.statusCode).toBe(201);
    expect(issued.json()).toMatchObject({ link: { kind: 'password_reset' }, emailed: false });
    const minutes = (Date.parse(issued.json().link.expires_at) - Date.now()) / 60_000;
    expect(minutes).toBeGreaterThan(59);
    expect(minutes).toBeLessThanOrEqual(60);
    const res = await redeem(tokenOf(issued.json().link.url), 'a brand new passphrase');
    expect(res.statusCode).toBe(200);
    expect((await getSession(user)).statusCode).toBe(401);
    expect((await signIn(t.app, 'reset@example.com', PASSWORD, { remoteAddress: nextAddress() })).statusCode).toBe(401);
    expect((await signIn(t.app, 'reset@example.com', 'a brand new passphrase', { remoteAddress: nextAddress() })).statusCode).toBe(200);
    const actions = (await sql(`select action from audit_events where target_id = ? order by created_at`, [user.userId])).map((r) => r.action);
    expect(actions).toEqual(expect.arrayContaining(['user.password_reset_requested', 'user.password_reset_completed']));
  });
});
