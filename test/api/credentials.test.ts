import { runAdminCli } from '../support/cli';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { CredentialService } from '../../domain/credentials/credentials';
import { newId } from '../../lib/ids';
import { CloudApiProvider } from '../../providers/msgapp/cloud-api';
import { policyFromCidrs, systemResolver } from '../../lib/net/ssrf';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { recordSecret } from '../support/secret-log';
import { answerOf } from '../support/http-error';

/**
 * Provider credentials through the API: registered per provider with zod-checked fields,
 * sealed at rest, never read back (metadata, fingerprint, last 4); what a credential
 * unlocks is asked of the provider itself (the msgapp sandbox's Graph API, a fake
 * OpenAI-compatible server); one workspace never sees nor uses another's credential.
 */
let db: TestDatabase;
let sandbox: MsgappSandbox;
let llm: FakeLlm;
let t: TestApp;
let wsA: string;
let wsB: string;
let authA: Record<string, string>;
let authB: Record<string, string>;

const WABA = '100000000000777';
const tokenA = `EAAG${randomBytes(20).toString('hex')}`;
const tokenB = `EAAG${randomBytes(20).toString('hex')}`;
const llmKey = `sk-${randomBytes(20).toString('hex')}`;
const NUMBERS_A = [
  { phoneNumberId: '4440001', displayPhoneNumber: '+15550400001' },
  { phoneNumberId: '4440002', displayPhoneNumber: '+15550400002' },
];
const NUMBER_B = { phoneNumberId: '5550001', displayPhoneNumber: '+15550500001' };

beforeAll(async () => {
  recordSecret('provider token', tokenA);
  recordSecret('provider token', tokenB);
  recordSecret('provider token', llmKey);
  db = await createTestDatabase();
  sandbox = await startMsgappSandbox({
    appSecret: 'app-secret',
    businessAccountId: WABA,
    numbers: [...NUMBERS_A.map((n) => ({ ...n, accessToken: tokenA })), { ...NUMBER_B, accessToken: tokenB }],
  });
  llm = await startFakeLlm({ models: ['gpt-test-large', 'gpt-test-small'], apiKey: llmKey });
  // Names only this resolver knows: a model server on loopback, and one that resolves to a private address.
  const resolve = async (host: string) => ({ 'llm.internal.test': ['127.0.0.1'], 'rebind.test': ['10.0.0.5'] })[host] ?? systemResolver(host);
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    serviceOptions: {
      msgapp: new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 }),
      sender: { policy: policyFromCidrs('127.0.0.0/8'), timeoutMs: 2_000, resolve },
    },
  });
  wsA = await createWorkspace(db.orm);
  wsB = await createWorkspace(db.orm);
  const scopes = ['credentials:read', 'credentials:write', 'workflows:write', 'workflows:publish'] as const;
  authA = bearer((await createKey(t.services, wsA, [...scopes])).key);
  authB = bearer((await createKey(t.services, wsB, [...scopes])).key);
});
afterAll(async () => {
  await t.close();
  await llm.close();
  await sandbox.close();
  await db.drop();
});

const post = (auth: Record<string, string>, payload: unknown) => t.app.inject({ method: 'POST', url: '/api/v1/credentials', headers: auth, payload: payload as object });
const get = (auth: Record<string, string>, url: string) => t.app.inject({ method: 'GET', url, headers: auth });

describe('registering credentials', () => {
  test('a msgapp credential: 201 with metadata, fingerprint and last 4; the token is sealed and never returned', async () => {
    const res = await post(authA, { name: 'Support line', provider: 'msgapp', access_token: tokenA, business_account_id: WABA });
    expect(res.statusCode).toBe(201);
    const cred = res.json();
    expect(cred).toEqual({
      id: expect.stringMatching(/^cred_[0-9a-f]{24}$/),
      name: 'Support line',
      provider: 'msgapp',
      settings: { business_account_id: WABA },
      secret_field: 'access_token',
      last4: tokenA.slice(-4),
      fingerprint: expect.stringMatching(/^fp_[0-9a-f]{24}$/),
      created_at: expect.any(String),
    });
    const read = await get(authA, `/api/v1/credentials/${cred.id}`);
    expect(read.json()).toEqual(cred);
    const listed = await get(authA, '/api/v1/credentials');
    expect(listed.json().credentials.map((c: { id: string }) => c.id)).toContain(cred.id);
    for (const body of [res.body, read.body, listed.body]) expect(body).not.toContain(tokenA.slice(0, -4));
    const [row] = await db.orm.em.fork().execute<{ secret_sealed: string }[]>('select secret_sealed from credentials where id = ?', [cred.id]);
    expect(row.secret_sealed).not.toContain(tokenA);
    expect(t.services.box.open(row.secret_sealed, cred.id)).toBe(tokenA);
    // The same secret registered again has the same fingerprint; another has another.
    const again = (await post(authA, { name: 'Same token', provider: 'msgapp', access_token: tokenA })).json();
    expect(again.fingerprint).toBe(cred.fingerprint);
    const other = (await post(authB, { name: 'B line', provider: 'msgapp', access_token: tokenB, business_account_id: WABA })).json();
    expect(other.fingerprint).not.toBe(cred.fingerprint);
  });

  test('each provider has its fields: the secret is write-only, the rest is returned as settings', async () => {
    const cases: Array<[Record<string, unknown>, Record<string, string>, string]> = [
      [{ provider: 'llm', api_key: `sk-${randomBytes(12).toString('hex')}` }, { base_url: 'https://api.openai.com/v1' }, 'api_key'],
      [{ provider: 'llm', api_key: `sk-${randomBytes(12).toString('hex')}`, base_url: llm.url }, { base_url: llm.url }, 'api_key'],
      [{ provider: 'voice', url: 'wss://voice.example.com', api_key: 'APIkey123', api_secret: randomBytes(24).toString('base64url') }, { url: 'wss://voice.example.com', api_key: 'APIkey123' }, 'api_secret'],
      [{ provider: 'telephony', username: 'trunk-user', password: 'short-pw!', sip_uri: 'sip:trunk.example.com' }, { username: 'trunk-user', sip_uri: 'sip:trunk.example.com' }, 'password'],
      [{ provider: 'mcp', bearer_token: `mcp_${randomBytes(16).toString('hex')}` }, {}, 'bearer_token'],
    ];
    for (const [input, settings, secretField] of cases) {
      const secret = input[secretField] as string;
      recordSecret('provider token', secret);
      const res = await post(authA, { name: `${String(input.provider)} cred`, ...input });
      expect({ provider: input.provider, status: res.statusCode }).toEqual({ provider: input.provider, status: 201 });
      expect(res.json()).toMatchObject({ provider: input.provider, settings, secret_field: secretField, last4: secret.length >= 16 ? secret.slice(-4) : null });
      expect(res.body).not.toContain(secret.length >= 16 ? secret.slice(0, -4) : secret);
    }
  });

  test('bad input is 400 invalid_request naming the field (a bearer secret no HTTP header can carry too); an unsafe llm base_url is 400 invalid_url', async () => {
    const refused: Array<[unknown, string, RegExp]> = [
      [{ name: 'x', access_token: 'abc' }, 'invalid_request', /provider/],
      [{ name: 'x', provider: 'fax', token: 'abc' }, 'invalid_request', /provider: .*msgapp, llm, voice, telephony, mcp/],
      [{ name: 'x', provider: 'msgapp' }, 'invalid_request', /access_token/],
      [{ name: 'x', provider: 'msgapp', access_token: '   ' }, 'invalid_request', /access_token: must not be empty/],
      [{ name: 'x', provider: 'msgapp', access_token: 'abc', business_account_id: 'acme' }, 'invalid_request', /business_account_id/],
      // Bearer secrets travel in an HTTP header: one no header can carry is refused here, not answered 502 at every use.
      [{ name: 'x', provider: 'msgapp', access_token: 'EAAG token' }, 'invalid_request', /access_token: must be visible ASCII/],
      [{ name: 'x', provider: 'llm', api_key: 'sk-clé' }, 'invalid_request', /api_key: must be visible ASCII/],
      [{ name: 'x', provider: 'mcp', bearer_token: 'abc\r\nX-Injected: 1' }, 'invalid_request', /bearer_token: must be visible ASCII/],
      [{ name: '', provider: 'mcp', bearer_token: 'abc' }, 'invalid_request', /name/],
      [{ name: 'x', provider: 'mcp', bearer_token: 'abc', secret: 'y' }, 'invalid_request', /secret/],
      [{ name: 'x', provider: 'llm', api_key: 'abc', base_url: 'not a url' }, 'invalid_request', /base_url/],
      [{ name: 'x', provider: 'voice', api_key: 'k', api_secret: 's' }, 'invalid_request', /url/],
      [{ name: 'x', provider: 'telephony', username: 'u', password: 'p', sip_uri: 'http://x' }, 'invalid_request', /sip_uri/],
      [{ name: 'x', provider: 'llm', api_key: 'abc', base_url: 'https://10.1.2.3/v1' }, 'invalid_url', /base_url: host is a private address/],
      [{ name: 'x', provider: 'llm', api_key: 'abc', base_url: 'http://8.8.8.8/v1' }, 'invalid_url', /base_url: scheme must be https/],
    ];
    const before = (await get(authA, '/api/v1/credentials?limit=200')).json().credentials.length;
    for (const [payload, code, message] of refused) {
      const res = await post(authA, payload);
      expect({ payload, status: res.statusCode, error: res.json().error }).toEqual({ payload, status: 400, error: code });
      expect(res.json().message).toMatch(message);
    }
    expect((await get(authA, '/api/v1/credentials?limit=200')).json().credentials.length).toBe(before);
  });

  test('voice and telephony endpoints on internal addresses are 400 invalid_url naming the field, before anything is stored', async () => {
    const before = (await get(authA, '/api/v1/credentials?limit=200')).json().credentials.length;
    const voice = (url: string) => ({ name: 'v', provider: 'voice', url, api_key: 'k', api_secret: `s${randomBytes(16).toString('hex')}` });
    const sip = (sip_uri: string) => ({ name: 's', provider: 'telephony', username: 'u', password: 'p', sip_uri });
    const refused: Array<[unknown, RegExp]> = [
      [voice('http://169.254.169.254/'), /^url: host is a link-local address/],
      [voice('ws://169.254.169.254/'), /^url: host is a link-local address/],
      [voice('wss://10.0.0.7:7880'), /^url: host is a private address/],
      [voice('https://[::ffff:169.254.169.254]/'), /^url: host is a link-local address/],
      [sip('sip:trunk-user@169.254.169.254:5060;transport=udp'), /^sip_uri: host is a link-local address/],
      [sip('sips:10.1.2.3'), /^sip_uri: host is a private address/],
    ];
    for (const [payload, message] of refused) {
      const res = await post(authA, payload);
      expect({ payload, status: res.statusCode, error: res.json().error }).toEqual({ payload, status: 400, error: 'invalid_url' });
      expect(res.json().message).toMatch(message);
    }
    expect((await get(authA, '/api/v1/credentials?limit=200')).json().credentials.length).toBe(before);

    // Loopback, with the test's allowance for 127.0.0.0/8 off (the operator's default): refused too.
    const strict = new CredentialService(db.orm.em, t.services.box, { policy: { allow: null } });
    await expect(answerOf(strict.register(wsA, voice('http://127.0.0.1:7880/')))).resolves.toMatchObject({ status: 400, code: 'invalid_url', message: expect.stringMatching(/^url: host is a loopback address/) });
    await expect(answerOf(strict.register(wsA, sip('sip:127.0.0.1:5060')))).resolves.toMatchObject({ status: 400, code: 'invalid_url', message: expect.stringMatching(/^sip_uri: host is a loopback address/) });
    // A public name is accepted as before (checked again by whatever connects to it).
    expect((await post(authA, voice('wss://voice.example.com'))).statusCode).toBe(201);
  });

  test('scopes: reading needs credentials:read, registering credentials:write', async () => {
    const readOnly = bearer((await createKey(t.services, wsA, ['credentials:read'])).key);
    const writeOnly = bearer((await createKey(t.services, wsA, ['credentials:write'])).key);
    const none = bearer((await createKey(t.services, wsA, ['kb:read'])).key);
    const body = { name: 'x', provider: 'mcp', bearer_token: `mcp_${randomBytes(16).toString('hex')}` };
    expect((await post(readOnly, body)).json()).toMatchObject({ error: 'insufficient_scope', message: expect.stringContaining('credentials:write') });
    expect((await post(readOnly, body)).statusCode).toBe(403);
    expect((await post(writeOnly, body)).statusCode).toBe(201);
    expect((await get(writeOnly, '/api/v1/credentials')).statusCode).toBe(403);
    for (const url of ['/api/v1/credentials', `/api/v1/credentials/${newId('cred')}`, `/api/v1/credentials/${newId('cred')}/resources`]) {
      const res = await get(none, url);
      expect({ url, status: res.statusCode, error: res.json().error }).toEqual({ url, status: 403, error: 'insufficient_scope' });
    }
  });

  test('the list pages with a cursor, newest first, and filters by provider', async () => {
    const ws = await createWorkspace(db.orm);
    const auth = bearer((await createKey(t.services, ws, ['credentials:read', 'credentials:write'])).key);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await post(auth, { name: `c${i}`, provider: i % 2 ? 'mcp' : 'llm', [i % 2 ? 'bearer_token' : 'api_key']: `secret-${randomBytes(10).toString('hex')}` })).json().id);
    const first = (await get(auth, '/api/v1/credentials?limit=2')).json();
    expect(first.credentials.map((c: { id: string }) => c.id)).toEqual([ids[4], ids[3]]);
    const second = (await get(auth, `/api/v1/credentials?limit=2&cursor=${first.next_cursor}`)).json();
    const third = (await get(auth, `/api/v1/credentials?limit=2&cursor=${second.next_cursor}`)).json();
    expect([...second.credentials, ...third.credentials].map((c: { id: string }) => c.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect(third.next_cursor).toBeNull();
    const mcp = (await get(auth, '/api/v1/credentials?provider=mcp')).json();
    expect(mcp.credentials.map((c: { id: string }) => c.id)).toEqual([ids[3], ids[1]]);
    expect((await get(auth, '/api/v1/credentials?provider=fax')).statusCode).toBe(400);
    expect((await get(auth, '/api/v1/credentials?cursor=nope')).statusCode).toBe(400);
  });
});

describe('GET /api/v1/credentials/{id}/resources asks the provider', () => {
  test('msgapp: the business account phone numbers this token may use (Graph GET /{waba-id}/phone_numbers)', async () => {
    const cred = (await post(authA, { name: 'A', provider: 'msgapp', access_token: tokenA, business_account_id: WABA })).json();
    const res = await get(authA, `/api/v1/credentials/${cred.id}/resources`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      credential_id: cred.id,
      provider: 'msgapp',
      resources: NUMBERS_A.map((n) => ({ type: 'phone_number', id: n.phoneNumberId, display_phone_number: n.displayPhoneNumber, verified_name: 'Sandbox Business', quality_rating: 'GREEN' })),
    });
    const credB = (await post(authB, { name: 'B', provider: 'msgapp', access_token: tokenB, business_account_id: WABA })).json();
    expect((await get(authB, `/api/v1/credentials/${credB.id}/resources`)).json().resources.map((r: { id: string }) => r.id)).toEqual([NUMBER_B.phoneNumberId]);
  });

  test('msgapp: every page of a large account is read (Graph cursors)', async () => {
    const token = `EAAG${randomBytes(20).toString('hex')}`;
    recordSecret('provider token', token);
    for (let i = 0; i < 130; i++) sandbox.registerNumber(String(7_000_000 + i), `+1555070${String(i).padStart(4, '0')}`, token);
    const cred = (await post(authA, { name: 'Big', provider: 'msgapp', access_token: token, business_account_id: WABA })).json();
    const res = (await get(authA, `/api/v1/credentials/${cred.id}/resources`)).json();
    expect(res.resources).toHaveLength(130);
    expect(new Set(res.resources.map((r: { id: string }) => r.id)).size).toBe(130);
  });

  test('msgapp: without business_account_id 422; a provider refusal is 422 provider_refused with its reason, never the token', async () => {
    const bare = (await post(authA, { name: 'No WABA', provider: 'msgapp', access_token: tokenA })).json();
    const noWaba = await get(authA, `/api/v1/credentials/${bare.id}/resources`);
    expect(noWaba.statusCode).toBe(422);
    expect(noWaba.json()).toMatchObject({ error: 'business_account_required', message: expect.stringContaining('business_account_id') });

    const wrong = (await post(authA, { name: 'Wrong WABA', provider: 'msgapp', access_token: tokenA, business_account_id: '999' })).json();
    const res = await get(authA, `/api/v1/credentials/${wrong.id}/resources`);
    expect(res.statusCode).toBe(422);
    expect(res.json()).toEqual({
      error: 'provider_refused',
      message: expect.stringMatching(/^The msgapp provider refused the credential: HTTP 400: Unsupported get request\. Object with ID '999' does not exist/),
      provider_status: 400,
    });
    expect(res.body).not.toContain(tokenA);
  });

  test('llm: the models of the server (GET /v1/models with the key); a refused key is 422 provider_refused with the reason, never the key; an unreachable server 502', async () => {
    const cred = (await post(authA, { name: 'Model server', provider: 'llm', api_key: llmKey, base_url: llm.url })).json();
    const res = await get(authA, `/api/v1/credentials/${cred.id}/resources`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      credential_id: cred.id,
      provider: 'llm',
      resources: [
        { type: 'model', id: 'gpt-test-large', owned_by: 'fake-llm', created_at: expect.any(String) },
        { type: 'model', id: 'gpt-test-small', owned_by: 'fake-llm', created_at: expect.any(String) },
      ],
    });
    expect(llm.modelRequests.at(-1)!.headers.authorization).toBe(`Bearer ${llmKey}`);

    const badKey = `sk-${randomBytes(20).toString('hex')}`;
    recordSecret('provider token', badKey);
    const bad = (await post(authA, { name: 'Wrong key', provider: 'llm', api_key: badKey, base_url: `${llm.url}/v1` })).json();
    const refused = await get(authA, `/api/v1/credentials/${bad.id}/resources`);
    expect(refused.statusCode).toBe(422);
    expect(refused.json()).toMatchObject({ error: 'provider_refused', provider_status: 401, message: expect.stringMatching(/^The llm provider refused the credential: HTTP 401: Incorrect API key provided/) });
    expect(refused.body).not.toContain(badKey);

    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const down = (await post(authA, { name: 'Down', provider: 'llm', api_key: llmKey, base_url: `http://127.0.0.1:${port}/v1` })).json();
    const unreachable = await get(authA, `/api/v1/credentials/${down.id}/resources`);
    expect(unreachable.statusCode).toBe(502);
    expect(unreachable.json()).toMatchObject({ error: 'provider_error', provider_status: 0, message: expect.stringMatching(/^The llm provider failed: transport: .*ECONNREFUSED/) });
  });

  test('llm: the connection goes to the address that was checked; a name resolving to a private address is never called', async () => {
    // The system resolver knows no llm.internal.test: only a connection pinned to the checked address reaches the server.
    const port = new URL(llm.url).port;
    const named = (await post(authA, { name: 'Named', provider: 'llm', api_key: llmKey, base_url: `http://llm.internal.test:${port}/v1` })).json();
    const res = await get(authA, `/api/v1/credentials/${named.id}/resources`);
    expect(res.statusCode).toBe(200);
    expect(res.json().resources.map((r: { id: string }) => r.id)).toEqual(['gpt-test-large', 'gpt-test-small']);
    expect(llm.modelRequests.at(-1)!.headers.host).toBe(`llm.internal.test:${port}`);

    // An https name is not resolved at registration (the provider may be down today); every call checks it.
    const before = llm.modelRequests.length;
    const rebind = (await post(authA, { name: 'Rebind', provider: 'llm', api_key: llmKey, base_url: 'https://rebind.test/v1' })).json();
    const refused = await get(authA, `/api/v1/credentials/${rebind.id}/resources`);
    expect(refused.statusCode).toBe(422);
    expect(refused.json()).toEqual({ error: 'invalid_url', reason: 'host resolves to a private address (10.0.0.5)', message: 'base_url: not called: host resolves to a private address (10.0.0.5)' });
    expect(llm.modelRequests.length).toBe(before);
  });

  test('voice, telephony and mcp: 501 not_implemented with the reason', async () => {
    for (const input of [
      { provider: 'voice', url: 'wss://voice.example.com', api_key: 'k', api_secret: `s${randomBytes(16).toString('hex')}` },
      { provider: 'telephony', username: 'u', password: `p${randomBytes(16).toString('hex')}` },
      { provider: 'mcp', bearer_token: `t${randomBytes(16).toString('hex')}` },
    ]) {
      const cred = (await post(authA, { name: 'x', ...input })).json();
      const res = await get(authA, `/api/v1/credentials/${cred.id}/resources`);
      expect({ provider: input.provider, status: res.statusCode, error: res.json().error }).toEqual({ provider: input.provider, status: 501, error: 'not_implemented' });
      expect(res.json().message).toContain(input.provider);
    }
  });
});

async function publishAgent(auth: Record<string, string>, number: { phoneNumberId: string; displayPhoneNumber: string }, credentialId: string): Promise<Record<string, unknown>> {
  const created = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Line agent', instructions: 'Help.', triggers: { msgapp: { number: number.displayPhoneNumber, phone_number_id: number.phoneNumberId, credential_id: credentialId } } },
  });
  expect(created.statusCode).toBe(201);
  const published = await t.app.inject({ method: 'POST', url: `/api/v1/agents/${created.json().id}/publish`, headers: auth });
  expect(published.statusCode).toBe(200);
  return published.json();
}

describe('the OpenAPI document', () => {
  test('describes one input shape per provider, secrets write-only, and a Credential without any secret field', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    const schemas = doc.components.schemas;
    const deref = (s: { $ref?: string }) => (s.$ref ? schemas[s.$ref.split('/').pop()!] : s);
    const body = deref(doc.paths['/api/v1/credentials'].post.requestBody.content['application/json'].schema);
    const variants = (body.oneOf ?? body.anyOf).map(deref);
    const secrets: Record<string, string> = { msgapp: 'access_token', llm: 'api_key', voice: 'api_secret', telephony: 'password', mcp: 'bearer_token' };
    expect(variants.map((v: { properties: { provider: { const: string } } }) => v.properties.provider.const).sort()).toEqual(Object.keys(secrets).sort());
    for (const v of variants) expect(v.properties[secrets[v.properties.provider.const]].writeOnly).toBe(true);
    const credential = deref(doc.paths['/api/v1/credentials/{id}'].get.responses['200'].content['application/json'].schema);
    expect(Object.keys(credential.properties).sort()).toEqual(['created_at', 'fingerprint', 'id', 'last4', 'name', 'provider', 'secret_field', 'settings']);
    expect(Object.keys(doc.paths['/api/v1/credentials/{id}/resources'].get.responses)).toEqual(expect.arrayContaining(['200', '404', '422', '501', '502', '503']));
  });
});

describe('admin CLI', () => {
  // A database of its own: the CLI generates its key on first use, which it refuses to do
  // where secrets sealed with another key (this file's app) already are.
  const cliDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-cred-cli-'));
  let cliDb: TestDatabase;
  beforeAll(async () => {
    cliDb = await createTestDatabase();
  });
  afterAll(async () => {
    await cliDb.drop();
    fs.rmSync(cliDataDir, { recursive: true, force: true });
  });
  const admin = (input: string, ...args: string[]) => runAdminCli(args, { env: { DATABASE_URL: cliDb.url, CONCIERGE_DATA_DIR: cliDataDir }, input });

  test('credential create --provider llm --setting base_url=…: the key from stdin, the same checks as the API', async () => {
    const ws = await createWorkspace(cliDb.orm);
    const key = `sk-${randomBytes(20).toString('hex')}`;
    recordSecret('provider token', key);
    const ok = await admin(`${key}\n`, 'credential', 'create', '--workspace', ws, '--name', 'Models', '--provider', 'llm', '--setting', 'base_url=https://llm.example.com/v1');
    expect({ code: ok.code, stderr: ok.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(ok.stdout)).toMatchObject({ provider: 'llm', settings: { base_url: 'https://llm.example.com/v1' }, secret_field: 'api_key', last4: key.slice(-4) });
    expect(ok.stdout + ok.stderr).not.toContain(key);

    const secretOnArgv = await admin('', 'credential', 'create', '--workspace', ws, '--name', 'x', '--provider', 'llm', '--setting', 'api_key=sk-visible');
    expect(secretOnArgv.code).toBe(2);
    expect(secretOnArgv.stderr).toMatch(/--setting api_key: the secret is read from --token-file or stdin/);
    const unsafe = await admin(`${key}\n`, 'credential', 'create', '--workspace', ws, '--name', 'x', '--provider', 'llm', '--setting', 'base_url=https://10.0.0.1/v1');
    expect(unsafe.code).toBe(1);
    expect(unsafe.stderr).toMatch(/^error: invalid_url: base_url: host is a private address/);
    expect(unsafe.stderr).not.toContain(key);
  }, 60_000);
});

describe('two workspaces', () => {
  test("workspace B never sees nor uses A's credential", async () => {
    const credA = (await post(authA, { name: 'A only', provider: 'msgapp', access_token: tokenA, business_account_id: WABA })).json();
    for (const url of [`/api/v1/credentials/${credA.id}`, `/api/v1/credentials/${credA.id}/resources`]) {
      const res = await get(authB, url);
      expect({ url, status: res.statusCode, error: res.json().error }).toEqual({ url, status: 404, error: 'not_found' });
    }
    expect((await get(authB, '/api/v1/credentials?limit=200')).json().credentials.map((c: { id: string }) => c.id)).not.toContain(credA.id);
    // An agent of B naming A's credential cannot run on it.
    const agent = await publishAgent(authB, NUMBERS_A[0], credA.id);
    expect(agent).toMatchObject({ runnable: false, invalid_reasons: expect.arrayContaining([`credential ${credA.id} does not exist in this workspace`]) });
    expect(await t.services.credentials.msgappToken(wsB, credA.id)).toBeNull();
    expect(await t.services.credentials.msgappToken(wsA, credA.id)).toBe(tokenA);
  });

  test('an agent runs on a msgapp credential registered through the API; another provider’s credential is no msgapp token', async () => {
    const credA = (await post(authA, { name: 'A line', provider: 'msgapp', access_token: tokenA, business_account_id: WABA })).json();
    const mcp = (await post(authA, { name: 'A mcp', provider: 'mcp', bearer_token: `t${randomBytes(16).toString('hex')}` })).json();
    const ok = await publishAgent(authA, NUMBERS_A[1], credA.id);
    expect(ok).toMatchObject({ runnable: true, invalid_reasons: [] });
    const wrongKind = await publishAgent(authA, NUMBERS_A[0], mcp.id);
    expect(wrongKind).toMatchObject({ runnable: false, invalid_reasons: expect.arrayContaining([`credential ${mcp.id} does not exist in this workspace`]) });
  });
});
