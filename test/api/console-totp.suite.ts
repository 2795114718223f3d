import { Secret, TOTP } from 'otpauth';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { createWorkspace, startTestApp, type TestApp } from '../support/app';
import { asBrowser, CONSOLE_ORIGIN, PASSWORD, randomAddress, sessionCookie, signedInUser, signIn, type Browser } from '../support/console';
import { recordSecret } from '../support/secret-log';

let db: TestDatabase;
let t: TestApp;
let ws: string;
let owner: Browser;
let admin: Browser;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, config: { PUBLIC_BASE_URL: CONSOLE_ORIGIN, CONSOLE_SIGNIN_ATTEMPTS_PER_ADDRESS: 1_000 }, serviceOptions: { publicBaseUrl: CONSOLE_ORIGIN } });
  ws = await createWorkspace(db.orm);
  owner = await signedInUser(t.app, t.services, ws, 'owner');
  admin = await signedInUser(t.app, t.services, ws, 'admin');
});
afterAll(async () => {
  await t?.close();
  await db?.drop();
});

const sql = (text: string, params: unknown[] = []) => db.orm.em.fork().execute(text, params);
/** The code an authenticator app shows for `secret`, `steps` periods from now. */
const codeOf = (secret: string, steps = 0) => new TOTP({ secret: Secret.fromBase32(secret) }).generate({ timestamp: Date.now() + steps * 30_000 });
const signInWith = (email: string, totp_code?: string) =>
  t.app.inject({ method: 'POST', url: '/api/console/sign-in', remoteAddress: randomAddress(), headers: { origin: CONSOLE_ORIGIN }, payload: { email, password: PASSWORD, ...(totp_code ? { totp_code } : {}) } });

/** Enrols `b` (enrol, then the first code): the secret and the code that confirmed it. */
async function enrol(b: Browser): Promise<{ secret: string; first: string }> {
  const begun = await t.app.inject({ method: 'POST', url: '/api/console/totp/enrol', headers: asBrowser(b) });
  expect(begun.statusCode).toBe(201);
  const { secret } = begun.json();
  recordSecret('totp secret', secret);
  const first = codeOf(secret);
  const confirmed = await t.app.inject({ method: 'POST', url: '/api/console/totp/confirm', headers: asBrowser(b), payload: { code: first } });
  expect(confirmed.statusCode).toBe(200);
  return { secret, first };
}

describe('TOTP as a second factor', () => {
  test('enrolment: a secret shown once as otpauth:// and text, sealed at rest, confirmed by a first code (a wrong one refused), audited', async () => {
    const agent = await signedInUser(t.app, t.services, ws, 'agent');
    expect((await t.app.inject({ method: 'GET', url: '/api/console/totp', headers: asBrowser(agent) })).json()).toEqual({ enrolled: false, required: false });
    const begun = await t.app.inject({ method: 'POST', url: '/api/console/totp/enrol', headers: asBrowser(agent) });
    expect(begun.statusCode).toBe(201);
    const { secret, otpauth_uri } = begun.json();
    recordSecret('totp secret', secret);
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    const uri = new URL(otpauth_uri);
    expect(uri.protocol).toBe('otpauth:');
    expect(uri.searchParams.get('secret')).toBe(secret);
    expect(uri.searchParams.get('issuer')).toBe('Concierge');
    expect(JSON.stringify(await sql('select * from user_totp where user_id = ?', [agent.userId]))).not.toContain(secret);
    const wrong = await t.app.inject({ method: 'POST', url: '/api/console/totp/confirm', headers: asBrowser(agent), payload: { code: codeOf(secret, 10) } });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().error).toBe('invalid_totp_code');
    // Not enrolled until confirmed: the password alone still signs in.
    expect((await signInWith(agent.email)).statusCode).toBe(200);
    const ok = await t.app.inject({ method: 'POST', url: '/api/console/totp/confirm', headers: asBrowser(agent), payload: { code: codeOf(secret) } });
    expect(ok.json()).toEqual({ enrolled: true, required: false });
    expect((await t.app.inject({ method: 'POST', url: '/api/console/totp/enrol', headers: asBrowser(agent) })).json().error).toBe('totp_already_enrolled');
    expect(await sql(`select 1 from audit_events where action = 'user.totp_enrolled' and target_id = ?`, [agent.userId])).toHaveLength(1);
  });

  test('sign-in asks for the code when enrolled (401 second_factor_required), refuses a wrong or reused one, and takes the current one', async () => {
    const viewer = await signedInUser(t.app, t.services, ws, 'viewer');
    const { secret, first } = await enrol(viewer);
    const bare = await signInWith(viewer.email);
    expect(bare.statusCode).toBe(401);
    expect(bare.json().error).toBe('second_factor_required');
    expect(sessionCookie(bare)).toBeUndefined();
    const wrong = await signInWith(viewer.email, codeOf(secret, 20));
    expect(wrong.json().error).toBe('invalid_totp_code');
    // The code that confirmed the enrolment is spent: the next step's code (the app's next one) is taken once.
    expect((await signInWith(viewer.email, first)).json().error).toBe('invalid_totp_code');
    const next = codeOf(secret, 1);
    const ok = await signInWith(viewer.email, next);
    expect(ok.statusCode).toBe(200);
    recordSecret('session token', sessionCookie(ok));
    expect((await signInWith(viewer.email, next)).json().error).toBe('invalid_totp_code');
    // A wrong password with a right code is still the password's 401.
    const badPassword = await t.app.inject({ method: 'POST', url: '/api/console/sign-in', remoteAddress: randomAddress(), headers: { origin: CONSOLE_ORIGIN }, payload: { email: viewer.email, password: 'not the password at all', totp_code: codeOf(secret, -1) } });
    expect(badPassword.json().error).toBe('invalid_credentials');
    const failures = await sql(`select details from audit_events where action = 'user.sign_in_failed' and target_id = ?`, [viewer.userId]);
    expect(failures.map((f) => f.details.reason)).toEqual(expect.arrayContaining(['invalid_totp_code']));
  });

  test('an owner requires it for the workspace (an admin may not): a person without one enrols at sign-in with a first code', async () => {
    const byAdmin = await t.app.inject({ method: 'PUT', url: '/api/console/totp/policy', headers: asBrowser(admin), payload: { required: true } });
    expect(byAdmin.statusCode).toBe(403);
    const person = await signedInUser(t.app, t.services, ws, 'agent');
    const set = await t.app.inject({ method: 'PUT', url: '/api/console/totp/policy', headers: asBrowser(owner), payload: { required: true } });
    expect(set.json()).toEqual({ required: true });
    try {
      const asked = await signInWith(person.email);
      expect(asked.statusCode).toBe(403);
      expect(asked.json().error).toBe('totp_enrolment_required');
      const { secret, otpauth_uri } = asked.json().enrolment;
      recordSecret('totp secret', secret);
      expect(otpauth_uri).toContain(`secret=${secret}`);
      expect(sessionCookie(asked)).toBeUndefined();
      // Asked again before a code: the same secret (the enrolment is not confirmed yet).
      expect((await signInWith(person.email)).json().enrolment.secret).toBe(secret);
      expect((await signInWith(person.email, codeOf(secret, 20))).json().error).toBe('invalid_totp_code');
      const enrolled = await signInWith(person.email, codeOf(secret));
      expect(enrolled.statusCode).toBe(200);
      recordSecret('session token', sessionCookie(enrolled));
      expect((await signInWith(person.email)).json().error).toBe('second_factor_required');
      expect(await sql(`select 1 from audit_events where action = 'sign_in_policy.changed' and workspace_id = ?`, [ws])).toHaveLength(1);
    } finally {
      await t.app.inject({ method: 'PUT', url: '/api/console/totp/policy', headers: asBrowser(owner), payload: { required: false } });
    }
  });

  test('recovery: an owner or admin resets a person’s second factor (audited); an admin never an owner’s', async () => {
    const person = await signedInUser(t.app, t.services, ws, 'viewer');
    await enrol(person);
    expect((await signInWith(person.email)).json().error).toBe('second_factor_required');
    const reset = await t.app.inject({ method: 'DELETE', url: `/api/console/users/${person.userId}/totp`, headers: asBrowser(admin) });
    expect(reset.statusCode).toBe(204);
    expect((await signInWith(person.email)).statusCode).toBe(200);
    expect(await sql(`select 1 from audit_events where action = 'user.totp_reset' and target_id = ?`, [person.userId])).toHaveLength(1);
    await enrol(owner);
    const ownersByAdmin = await t.app.inject({ method: 'DELETE', url: `/api/console/users/${owner.userId}/totp`, headers: asBrowser(admin) });
    expect(ownersByAdmin.statusCode).toBe(403);
    const agent = await signedInUser(t.app, t.services, ws, 'agent');
    expect((await t.app.inject({ method: 'DELETE', url: `/api/console/users/${person.userId}/totp`, headers: asBrowser(agent) })).statusCode).toBe(403);
    expect((await t.app.inject({ method: 'DELETE', url: `/api/console/users/${owner.userId}/totp`, headers: asBrowser(owner) })).statusCode).toBe(204);
    expect((await signIn(t.app, owner.email, PASSWORD, { remoteAddress: randomAddress() })).statusCode).toBe(200);
  });
});

describe('a password reset is no way around the second factor', () => {
  test('a reset link of an enrolled account asks for the code (the link not used until it is given)', async () => {
    const person = await signedInUser(t.app, t.services, ws, 'viewer');
    const { secret } = await enrol(person);
    const issued = await t.app.inject({ method: 'POST', url: `/api/console/users/${person.userId}/link`, headers: asBrowser(owner) });
    expect(issued.statusCode).toBe(201);
    const token = new URL(issued.json().link.url).hash.replace(/^#token=/, '');
    const redeem = (totp_code?: string) =>
      t.app.inject({ method: 'POST', url: '/api/console/links/redeem', remoteAddress: randomAddress(), headers: { origin: CONSOLE_ORIGIN }, payload: { token, password: 'a brand new passphrase 42', ...(totp_code ? { totp_code } : {}) } });
    const bare = await redeem();
    expect(bare.statusCode).toBe(401);
    expect(bare.json().error).toBe('second_factor_required');
    expect((await redeem(codeOf(secret, 20))).json().error).toBe('invalid_totp_code');
    const ok = await redeem(codeOf(secret, 1));
    expect(ok.statusCode).toBe(200);
    recordSecret('session token', sessionCookie(ok));
  });
});
