import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SSO_FLOW_AAD, SsoService, type SsoError, type SsoNetwork } from '../../domain/people/sso';
import { policyFromCidrs } from '../../lib/net/ssrf';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { createWorkspace, startTestApp, type TestApp } from '../support/app';
import { asBrowser, CONSOLE_ORIGIN, sessionCookie, signedInUser, type Browser } from '../support/console';
import { loginAtProvider, startOidcProvider, type OidcAccount, type OidcProvider } from '../support/oidc';
import { recordSecret } from '../support/secret-log';

let db: TestDatabase;
let t: TestApp;
let idp: OidcProvider;
let wsA: string;
let wsB: string;
let ownerA: Browser;
let ownerB: Browser;

const CALLBACK = `${CONSOLE_ORIGIN}/api/console/sso/callback`;
const CLIENT_ID = 'concierge-console';
const CLIENT_SECRET = `cs_${randomBytes(24).toString('base64url')}`;

/** The provider's accounts: the login typed in its dev form (also the subject), with the claims the tests choose. */
const ACCOUNTS: Record<string, OidcAccount> = {
  ada: { email: 'ada@a.test', email_verified: true },
  unverified: { email: 'unverified@a.test', email_verified: false },
  // A second subject of the same IdP claiming Ada's email.
  impostor: { email: 'ada@a.test', email_verified: true },
  carol: { email: 'Carol@A.test', email_verified: true },
  bob: { email: 'bob@b.test', email_verified: true },
  gone: { email: 'gone@a.test', email_verified: true },
  pkce: { email: 'pkce@a.test', email_verified: true },
  other: { email: 'other@elsewhere.test', email_verified: true },
};

const sql = (text: string, params: unknown[] = []) => db.orm.em.fork().execute(text, params);

beforeAll(async () => {
  recordSecret('sso client secret', CLIENT_SECRET);
  [db, idp] = await Promise.all([
    createTestDatabase(),
    startOidcProvider({ client: { client_id: CLIENT_ID, client_secret: CLIENT_SECRET, redirect_uris: [CALLBACK] }, accounts: ACCOUNTS }),
  ]);
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    config: { PUBLIC_BASE_URL: CONSOLE_ORIGIN, CONSOLE_SIGNIN_ATTEMPTS_PER_ADDRESS: 1_000 },
    serviceOptions: { publicBaseUrl: CONSOLE_ORIGIN },
  });
  wsA = await createWorkspace(db.orm, 'A');
  wsB = await createWorkspace(db.orm, 'B');
  ownerA = await signedInUser(t.app, t.services, wsA, 'owner', 'owner@a.test');
  ownerB = await signedInUser(t.app, t.services, wsB, 'owner', 'owner@b.test');
  expect((await putSso(ownerA, { email_domains: ['a.test'], default_role: 'agent' })).statusCode).toBe(200);
  expect((await putSso(ownerB, { email_domains: ['b.test'], default_role: 'viewer' })).statusCode).toBe(200);
});
afterAll(async () => {
  await t?.close();
  await idp?.close();
  await db?.drop();
});

function putSso(b: Browser, fields: Record<string, unknown> = {}) {
  return t.app.inject({
    method: 'PUT',
    url: '/api/console/sso',
    headers: asBrowser(b),
    payload: { issuer: idp.issuer, client_id: CLIENT_ID, client_secret: CLIENT_SECRET, email_domains: ['a.test'], default_role: 'agent', enabled: true, ...fields },
  });
}

/** GET /api/console/sso/start for `email`: the redirect and the sealed flow cookie. */
async function start(email: string) {
  const res = await t.app.inject({ method: 'GET', url: `/api/console/sso/start?email=${encodeURIComponent(email)}` });
  const flow = res.cookies.find((c) => c.name === 'concierge_sso');
  return { res, location: String(res.headers.location), flow };
}

function callback(url: URL, flow: string | undefined, cookie?: string) {
  const cookies = [flow ? `concierge_sso=${flow}` : null, cookie ? `concierge_session=${cookie}` : null].filter(Boolean).join('; ');
  return t.app.inject({ method: 'GET', url: `${url.pathname}${url.search}`, headers: cookies ? { cookie: cookies } : {} });
}

/** The whole round trip: start with `email`, sign in at the provider as `login`, come back with the flow cookie. */
async function ssoSignIn(email: string, login: string) {
  const started = await start(email);
  expect(started.res.statusCode).toBe(303);
  const back = await loginAtProvider(started.location, login, CALLBACK);
  // The callback's URL carries the authorization code: the request log redacts it (the run's log scan checks).
  recordSecret('oauth code', back.searchParams.get('code'));
  const res = await callback(back, started.flow?.value);
  return { res, location: String(res.headers.location), cookie: sessionCookie(res) };
}

const session = (cookie: string) => t.app.inject({ method: 'GET', url: '/api/console/session', headers: { cookie: `concierge_session=${cookie}` } });

describe('SSO settings', () => {
  test('only an owner reads or changes them: an admin gets 403, an API-less agent too', async () => {
    const admin = await signedInUser(t.app, t.services, wsA, 'admin');
    for (const req of [
      { method: 'GET' as const, url: '/api/console/sso' },
      { method: 'PUT' as const, url: '/api/console/sso', payload: { issuer: idp.issuer, client_id: 'x', client_secret: 'y', email_domains: ['evil.test'], default_role: 'admin', enabled: true } },
      { method: 'DELETE' as const, url: '/api/console/sso' },
    ]) {
      const res = await t.app.inject({ ...req, headers: asBrowser(admin) });
      expect({ req: req.method, status: res.statusCode, error: res.json().error }).toEqual({ req: req.method, status: 403, error: 'forbidden' });
    }
    expect((await t.app.inject({ method: 'GET', url: '/api/console/sso', headers: asBrowser(ownerA) })).json().sso.email_domains).toEqual(['a.test']);
  });

  test('the client secret is write-only: shown as its last four, sealed at rest, never in the audit log', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/console/sso', headers: asBrowser(ownerA) });
    expect(res.statusCode).toBe(200);
    expect(res.json().sso).toMatchObject({ issuer: idp.issuer, client_id: CLIENT_ID, client_secret_last4: CLIENT_SECRET.slice(-4), default_role: 'agent', enabled: true, redirect_uri: CALLBACK });
    expect(res.body).not.toContain(CLIENT_SECRET);
    // Changing other fields without a secret keeps the stored one.
    const put = await putSso(ownerA, { client_secret: undefined, email_domains: ['a.test', 'A.test'] });
    expect(put.statusCode).toBe(200);
    expect(put.body).not.toContain(CLIENT_SECRET);
    expect(put.json().client_secret_last4).toBe(CLIENT_SECRET.slice(-4));
    const rows = await sql('select * from sso_settings');
    expect(JSON.stringify(rows)).not.toContain(CLIENT_SECRET);
    const audit = await sql(`select * from audit_events where action = 'sso.settings_changed'`);
    expect(audit.length).toBeGreaterThanOrEqual(3);
    expect(JSON.stringify(audit)).not.toContain(CLIENT_SECRET);
    expect(audit.find((a) => a.workspace_id === wsA)?.details).toMatchObject({ issuer: idp.issuer, email_domains: ['a.test'] });
  });

  test('a domain belongs to one workspace only (409 sso_domain_taken); the first set-up needs a secret; the issuer is checked', async () => {
    const taken = await putSso(ownerB, { email_domains: ['b.test', 'a.test'] });
    expect(taken.statusCode).toBe(409);
    expect(taken.json().error).toBe('sso_domain_taken');
    expect((await t.app.inject({ method: 'GET', url: '/api/console/sso', headers: asBrowser(ownerB) })).json().sso.email_domains).toEqual(['b.test']);
    const wsC = await createWorkspace(db.orm, 'C');
    const ownerC = await signedInUser(t.app, t.services, wsC, 'owner');
    expect((await putSso(ownerC, { client_secret: undefined, email_domains: ['c.test'] })).json().error).toBe('invalid_request');
    // Plain http to an address the operator did not allow, and metadata addresses, are refused as for any provider URL.
    for (const issuer of ['http://10.1.2.3/', 'https://169.254.169.254/', 'ftp://idp.test/']) {
      const res = await putSso(ownerC, { issuer, email_domains: ['c.test'] });
      expect({ issuer, status: res.statusCode }).toEqual({ issuer, status: 400 });
    }
    expect((await putSso(ownerC, { email_domains: ['not a domain'] })).statusCode).toBe(400);
    expect((await putSso(ownerC, { default_role: 'owner', email_domains: ['c.test'] })).statusCode).toBe(400);
  });
});

describe('signing in through the OpenID Connect provider', () => {
  test('a verified email signs in: a new user with the default role, bound by issuer and subject; audited with method sso', async () => {
    const { res, location, cookie } = await ssoSignIn('ada@a.test', 'ada');
    expect(res.statusCode).toBe(303);
    expect(location).toBe('/console/');
    expect(cookie).toBeDefined();
    recordSecret('session token', cookie);
    expect(res.cookies.find((c) => c.name === 'concierge_session')).toMatchObject({ httpOnly: true, sameSite: 'Lax', secure: true, path: '/' });
    const me = (await session(cookie!)).json();
    expect(me.user).toMatchObject({ email: 'ada@a.test', role: 'agent', status: 'active' });
    expect(me.workspace.id).toBe(wsA);
    const [binding] = await sql('select * from user_identities where subject = ?', ['ada']);
    expect(binding).toMatchObject({ issuer: idp.issuer, user_id: me.user.id, workspace_id: wsA });
    const [signedIn] = await sql(`select * from audit_events where action = 'user.signed_in' and actor_id = ?`, [me.user.id]);
    expect(signedIn.details).toMatchObject({ method: 'sso', issuer: idp.issuer });
    // A second sign-in finds the binding: the same user, a new session.
    const again = await ssoSignIn('ada@a.test', 'ada');
    expect(again.cookie).toBeDefined();
    expect(again.cookie).not.toBe(cookie);
    recordSecret('session token', again.cookie);
    expect((await session(again.cookie!)).json().user.id).toBe(me.user.id);
  });

  test('an existing user of the workspace with the same email is bound, keeping their role', async () => {
    const carol = await signedInUser(t.app, t.services, wsA, 'admin', 'carol@a.test');
    const { location, cookie } = await ssoSignIn('carol@a.test', 'carol');
    expect(location).toBe('/console/');
    recordSecret('session token', cookie);
    expect((await session(cookie!)).json().user).toMatchObject({ id: carol.userId, role: 'admin' });
  });

  test('an unverified email is refused, onto the sign-in page', async () => {
    const { res, location, cookie } = await ssoSignIn('unverified@a.test', 'unverified');
    expect(res.statusCode).toBe(303);
    expect(location).toBe('/console/sign-in?error=sso_email_unverified');
    expect(cookie).toBeUndefined();
    expect(await sql(`select 1 from console_users where email = 'unverified@a.test'`)).toHaveLength(0);
    const [failed] = await sql(`select * from audit_events where action = 'user.sign_in_failed' and actor_email = 'unverified@a.test'`);
    expect(failed.details).toMatchObject({ method: 'sso', reason: 'sso_email_unverified' });
  });

  test("a second subject with a bound user's email does not get that user", async () => {
    await ssoSignIn('ada@a.test', 'ada');
    const { location, cookie } = await ssoSignIn('ada@a.test', 'impostor');
    expect(location).toBe('/console/sign-in?error=sso_account_conflict');
    expect(cookie).toBeUndefined();
    expect(await sql(`select 1 from user_identities where subject = 'impostor'`)).toHaveLength(0);
  });

  test("a domain of workspace B never signs into A: B's person at A's IdP flow is refused, and B's own flow lands in B", async () => {
    // Started for A (an a.test address), signed in at the IdP as bob@b.test.
    const crossed = await ssoSignIn('someone@a.test', 'bob');
    expect(crossed.location).toBe('/console/sign-in?error=sso_email_domain');
    expect(await sql(`select 1 from console_users where email = 'bob@b.test' and workspace_id = ?`, [wsA])).toHaveLength(0);
    // An identity whose domain no workspace serves is refused too.
    expect((await ssoSignIn('x@a.test', 'other')).location).toBe('/console/sign-in?error=sso_email_domain');
    const own = await ssoSignIn('bob@b.test', 'bob');
    expect(own.location).toBe('/console/');
    recordSecret('session token', own.cookie);
    expect((await session(own.cookie!)).json()).toMatchObject({ workspace: { id: wsB }, user: { email: 'bob@b.test', role: 'viewer' } });
  });

  test('an unknown domain gets the same neutral answer as a disabled SSO, without reaching an IdP', async () => {
    const unknown = await start('someone@unknown.test');
    const wsD = await createWorkspace(db.orm, 'D');
    const ownerD = await signedInUser(t.app, t.services, wsD, 'owner');
    expect((await putSso(ownerD, { email_domains: ['d.test'], enabled: false })).statusCode).toBe(200);
    const disabled = await start('someone@d.test');
    const junk = await start('not-an-email');
    for (const r of [unknown, disabled, junk]) {
      expect(r.res.statusCode).toBe(303);
      expect(r.location).toBe('/console/sign-in?error=sso_unavailable');
      expect(r.flow).toBeUndefined();
    }
  });

  test('the authorization request uses PKCE (S256), state and nonce; a wrong code verifier is refused by the provider', async () => {
    const started = await start('pkce@a.test');
    const auth = new URL(started.location);
    expect(auth.origin).toBe(idp.issuer);
    expect(auth.searchParams.get('code_challenge_method')).toBe('S256');
    expect(auth.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(auth.searchParams.get('state')).toBeTruthy();
    expect(auth.searchParams.get('nonce')).toBeTruthy();
    // The flow cookie: sealed, HttpOnly, only for the SSO paths, short-lived.
    expect(started.flow).toMatchObject({ httpOnly: true, sameSite: 'Lax', secure: true, path: '/api/console/sso/' });
    expect(started.flow!.maxAge).toBe(600);
    expect(started.flow!.value).not.toContain(auth.searchParams.get('state')!);
    const back = await loginAtProvider(started.location, 'pkce', CALLBACK);
    const flow = JSON.parse(t.services.box.open(started.flow!.value, SSO_FLOW_AAD));
    const forged = t.services.box.seal(JSON.stringify({ ...flow, v: `${flow.v.slice(0, -4)}AAAA` }), SSO_FLOW_AAD);
    expect(String((await callback(back, forged)).headers.location)).toBe('/console/sign-in?error=sso_failed');
    expect(await sql(`select 1 from console_users where email = 'pkce@a.test'`)).toHaveLength(0);
  });

  test('state and nonce tampering, another browser, a replayed or expired flow: refused', async () => {
    const refusedWith = async (mutate: (flow: Record<string, unknown>, back: URL) => { flow?: string; url?: URL }, expected = '/console/sign-in?error=sso_failed') => {
      const started = await start('ada@a.test');
      const back = await loginAtProvider(started.location, 'ada', CALLBACK);
      const flow = JSON.parse(t.services.box.open(started.flow!.value, SSO_FLOW_AAD)) as Record<string, unknown>;
      const changed = mutate(flow, back);
      const res = await callback(changed.url ?? back, 'flow' in changed ? changed.flow : started.flow!.value);
      expect(String(res.headers.location)).toBe(expected);
      expect(sessionCookie(res)).toBeUndefined();
    };
    const seal = (f: Record<string, unknown>) => t.services.box.seal(JSON.stringify(f), SSO_FLOW_AAD);
    // The state in the URL is not the browser's.
    await refusedWith((_f, back) => {
      const url = new URL(back);
      url.searchParams.set('state', 'tampered-state');
      return { url };
    });
    // The ID token's nonce is not the flow's.
    await refusedWith((f) => ({ flow: seal({ ...f, nonce: 'another-nonce' }) }));
    // No flow cookie (the callback opened in another browser), or one the browser forged.
    await refusedWith(() => ({ flow: undefined }));
    await refusedWith(() => ({ flow: 'v1.AAAA.BBBB.CCCC' }));
    // Past its ten minutes.
    await refusedWith((f) => ({ flow: seal({ ...f, exp: Date.now() - 1 }) }), '/console/sign-in?error=sso_expired');
    // A second use of the same code and flow: the provider spent the code.
    const started = await start('ada@a.test');
    const back = await loginAtProvider(started.location, 'ada', CALLBACK);
    const first = await callback(back, started.flow!.value);
    expect(String(first.headers.location)).toBe('/console/');
    recordSecret('session token', sessionCookie(first));
    expect(first.cookies.find((c) => c.name === 'concierge_sso')?.maxAge ?? 0).toBeLessThanOrEqual(0);
    expect(String((await callback(back, started.flow!.value)).headers.location)).toBe('/console/sign-in?error=sso_failed');
  });

  test('a removed user cannot come back through SSO; invited again, they can', async () => {
    const first = await ssoSignIn('gone@a.test', 'gone');
    expect(first.location).toBe('/console/');
    recordSecret('session token', first.cookie);
    const userId = (await session(first.cookie!)).json().user.id;
    const removed = await t.app.inject({ method: 'DELETE', url: `/api/console/users/${userId}`, headers: asBrowser(ownerA) });
    expect(removed.statusCode).toBe(204);
    expect((await session(first.cookie!)).statusCode).toBe(401);
    expect((await ssoSignIn('gone@a.test', 'gone')).location).toBe('/console/sign-in?error=sso_user_removed');
    const invited = await t.app.inject({ method: 'POST', url: '/api/console/users', headers: asBrowser(ownerA), payload: { email: 'gone@a.test', role: 'viewer' } });
    expect(invited.statusCode).toBe(201);
    const back = await ssoSignIn('gone@a.test', 'gone');
    expect(back.location).toBe('/console/');
    recordSecret('session token', back.cookie);
    expect((await session(back.cookie!)).json().user).toMatchObject({ id: invited.json().user.id, role: 'viewer', status: 'active' });
  });

  test('a sign-in ends the session the browser had (no fixation)', async () => {
    const before = await signedInUser(t.app, t.services, wsA, 'viewer');
    const started = await start('ada@a.test');
    const back = await loginAtProvider(started.location, 'ada', CALLBACK);
    const res = await callback(back, started.flow!.value, before.cookie);
    expect(String(res.headers.location)).toBe('/console/');
    recordSecret('session token', sessionCookie(res));
    expect((await session(before.cookie)).statusCode).toBe(401);
  });

  test('the client secret never reaches a response or the audit log', async () => {
    const all = await sql(`select details::text from audit_events`);
    expect(JSON.stringify(all)).not.toContain(CLIENT_SECRET);
    // (The run's log scan checks every log for it: recorded above.)
  });
});

describe('the identity provider is reached as any provider URL: checked addresses, bounded in time and bytes', () => {
  let wsE: string;
  let ownerE: Browser;
  beforeAll(async () => {
    wsE = await createWorkspace(db.orm, 'E');
    ownerE = await signedInUser(t.app, t.services, wsE, 'owner');
  });
  const service = (net: Partial<SsoNetwork> = {}) =>
    new SsoService(db.orm.em, t.services.box, t.services.sessions, t.services.people, { policy: policyFromCidrs('127.0.0.0/8'), timeoutMs: 5_000, ...net }, CONSOLE_ORIGIN);
  const startError = (s: SsoService, email: string) => s.start(email).then(() => null, (err: SsoError) => ({ code: err.code, message: err.message }));

  test('requests to the IdP are checked as provider URLs: under a policy without loopback, the loopback IdP is refused', async () => {
    expect((await putSso(ownerE, { email_domains: ['e.test'] })).statusCode).toBe(200);
    expect(await startError(service({ policy: policyFromCidrs('') }), 'x@e.test')).toEqual({ code: 'sso_failed', message: expect.stringContaining('host is a loopback address') });
    expect(await startError(service(), 'x@e.test')).toBeNull();
  });

  test('an answer larger than the cap, or one that never comes, ends the attempt', async () => {
    const server = http.createServer((req, res) => {
      if (req.url?.startsWith('/slow')) return; // never answers
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ issuer: `http://127.0.0.1:${(server.address() as AddressInfo).port}/big`, padding: 'x'.repeat(2 * 1024 * 1024) }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      expect((await putSso(ownerE, { issuer: `${base}/big`, email_domains: ['e.test'] })).statusCode).toBe(200);
      expect(await startError(service(), 'x@e.test')).toEqual({ code: 'sso_failed', message: expect.stringContaining('larger than') });
      expect((await putSso(ownerE, { issuer: `${base}/slow`, email_domains: ['e.test'] })).statusCode).toBe(200);
      const started = Date.now();
      expect(await startError(service({ timeoutMs: 300 }), 'x@e.test')).toMatchObject({ code: 'sso_failed' });
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
