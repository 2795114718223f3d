import { runAdminCli, runTs } from '../support/cli';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { hashApiKey } from '../../domain/keys/api-keys';
import { ALL_SCOPES } from '../../domain/keys/scopes';
import { SecretBox } from '../../lib/crypto/secret-box';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';


let db: TestDatabase;
let a: TestApp;
let b: TestApp;
let ws: string;
/** The installation's encryption key: the API processes' and the CLI's (its data directory's key file). */
const SHARED_KEY = randomBytes(32).toString('hex');

beforeAll(async () => {
  db = await createTestDatabase();
  // Two API processes' worth of state: each has its own key cache and listener. They seal with the key the admin
  // CLI below finds in its data directory, as an installation's processes share one key (new keys' values are sealed).
  const box = SecretBox.fromString(SHARED_KEY);
  a = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { box } });
  b = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { box } });
  ws = await createWorkspace(db.orm);
});
afterAll(async () => {
  await a.close();
  await b.close();
  await db.drop();
});

const status = async (t: TestApp, key: string) => (await t.app.inject({ method: 'GET', url: '/api/v1/kb/folders', headers: bearer(key) })).statusCode;

/** Polls until `check` holds; returns how long it took. */
async function within(ms: number, check: () => Promise<boolean>): Promise<number> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > ms) throw new Error(`not true within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - start;
}

describe('API keys', () => {
  test('stored only as a SHA-256 hash and the sk_ + 8 display prefix', async () => {
    const { id, key } = await createKey(a.services, ws, ['kb:read']);
    const rows = await db.orm.em.fork().execute('select * from api_keys where id = ?', [id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].secret_hash).toBe(hashApiKey(key));
    expect(rows[0].prefix).toBe(key.slice(0, 11));
    expect(JSON.stringify(rows[0])).not.toContain(key.slice(11));
  });

  test('deletion is effective at once on every API process, cached or not', async () => {
    const { id, key } = await createKey(a.services, ws, ['kb:read']);
    expect(await status(a, key)).toBe(200);
    expect(await status(b, key)).toBe(200); // both caches now hold the key
    await a.services.apiKeys.delete(id);
    expect(await status(a, key)).toBe(401); // the process that deleted it: immediately
    const tookMs = await within(1000, async () => (await status(b, key)) === 401);
    expect(tookMs).toBeLessThan(1000);
    expect((await b.app.inject({ method: 'GET', url: '/api/v1/kb/folders', headers: bearer(key) })).json().error).toBe('revoked_api_key');
  });

  test('rotation is effective at once on every API process', async () => {
    const { id, key } = await createKey(a.services, ws, ['kb:read']);
    expect(await status(a, key)).toBe(200);
    expect(await status(b, key)).toBe(200);
    const rotated = await b.services.apiKeys.rotate(id);
    expect(await status(b, key)).toBe(401);
    await within(1000, async () => (await status(a, key)) === 401);
    expect(await status(a, rotated.key)).toBe(200);
    expect(await status(b, rotated.key)).toBe(200);
  });
});

test("docs/api.md's scope table: one row per scope, in the order the CLI lists them; every route's scope is one of them", () => {
  const readme = fs.readFileSync(path.join(__dirname, '../../docs/api.md'), 'utf8');
  const rows = [...readme.matchAll(/^\| `([a-z_]+:[a-z]+)` \| (.+) \|$/gm)].map((m) => m[1]);
  expect(rows).toEqual(ALL_SCOPES);
  const routeScopes = new Set(a.app.routeTable.flatMap((r) => (r.scope ? [r.scope] : [])));
  for (const scope of routeScopes) expect(ALL_SCOPES).toContain(scope);
});

describe('admin CLI', () => {
  // The CLI's own data directory (its encryption key is generated there on first use), so
  // the run never depends on, nor writes, the checkout's .data.
  const cliDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-cli-'));
  fs.writeFileSync(path.join(cliDataDir, 'encryption.key'), SHARED_KEY, { mode: 0o600 });
  afterAll(() => fs.rmSync(cliDataDir, { recursive: true, force: true }));

  const adminWith = (opts: { env?: Record<string, string>; input?: string }, ...args: string[]) =>
    runAdminCli(args, { env: { DATABASE_URL: db.url, CONCIERGE_DATA_DIR: cliDataDir, ...opts.env }, input: opts.input });
  const admin = (...args: string[]) => adminWith({}, ...args);
  const count = async (table: string) => Number((await db.orm.em.fork().execute<{ n: string }[]>(`select count(*) as n from ${table}`))[0].n);
  const cliBox = () => SecretBox.fromString(fs.readFileSync(path.join(cliDataDir, 'encryption.key'), 'utf8'));

  test('the process entry (bin/admin.ts as npm run admin runs it): usage and exit 0 for --help, exit 2 and usage on stderr for a usage error, JSON on stdout and exit 0 for a command', async () => {
    const env = { DATABASE_URL: db.url, CONCIERGE_DATA_DIR: cliDataDir };
    const help = await runTs(['bin/admin.ts', '--help'], { env });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('usage: npm run -s admin');
    const usage = await runTs(['bin/admin.ts', 'key', 'create', '--workspace', 'ws_x'], { env });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('error: missing --name');
    expect(usage.stdout).toBe('');
    const listed = await runTs(['bin/admin.ts', 'workspace', 'list'], { env });
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual({ workspaces: expect.arrayContaining([expect.objectContaining({ id: ws })]) });
  });

  test('workspace and key lifecycle, JSON on stdout', async () => {
    const created = await admin('workspace', 'create', '--name', 'CLI Co');
    expect(created.code).toBe(0);
    const wsId = JSON.parse(created.stdout).id;
    expect(wsId).toMatch(/^ws_/);

    const keyRes = await admin('key', 'create', '--workspace', wsId, '--name', 'ci', '--scopes', 'kb:read,kb:write');
    expect(keyRes.code).toBe(0);
    const key = JSON.parse(keyRes.stdout);
    expect(key).toEqual({ id: expect.stringMatching(/^key_/), key: expect.stringMatching(/^sk_[0-9a-f]{64}$/), prefix: key.key.slice(0, 11), scopes: ['kb:read', 'kb:write'] });
    expect(await status(a, key.key)).toBe(200);

    const listed = JSON.parse((await admin('key', 'list', '--workspace', wsId)).stdout);
    expect(listed.keys).toEqual([expect.objectContaining({ id: key.id, name: 'ci', prefix: key.prefix, scopes: ['kb:read', 'kb:write'], status: 'active' })]);
    expect(JSON.stringify(listed)).not.toContain(key.key);

    const rotated = JSON.parse((await admin('key', 'rotate', key.id)).stdout);
    expect(rotated).toEqual({ id: key.id, key: expect.stringMatching(/^sk_[0-9a-f]{64}$/) });
    await within(1000, async () => (await status(a, key.key)) === 401);
    expect(await status(a, rotated.key)).toBe(200);

    expect((await admin('key', 'delete', key.id)).code).toBe(0);
    await within(1000, async () => (await status(a, rotated.key)) === 401);
  }, 60_000);

  test('site create, rotate-secret (with grace), suspend and resume', async () => {
    const agent = await a.services.agents.create(ws, { name: 'Widget agent' });
    const created = await admin('site', 'create', '--workspace', ws, '--agent', agent.id, '--origins', 'https://a.example,https://b.example');
    expect(created.code).toBe(0);
    const site = JSON.parse(created.stdout);
    expect(site).toEqual({ site_id: expect.stringMatching(/^site_/), site_secret: expect.stringMatching(/^sitesec_/) });
    const rotated = JSON.parse((await admin('site', 'rotate-secret', site.site_id, '--grace-hours', '2')).stdout);
    expect(rotated).toEqual({ site_id: site.site_id, site_secret: expect.stringMatching(/^sitesec_/), previous_expires_at: expect.any(String) });
    expect(rotated.site_secret).not.toBe(site.site_secret);
    expect(JSON.parse((await admin('site', 'suspend', site.site_id)).stdout)).toEqual({ site_id: site.site_id, status: 'suspended' });
    expect(JSON.parse((await admin('site', 'resume', site.site_id)).stdout)).toEqual({ site_id: site.site_id, status: 'active' });
    const bad = await admin('site', 'create', '--workspace', ws, '--agent', agent.id, '--origins', 'not-an-origin');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/origins/);
  }, 60_000);

  test('errors: clear message on stderr, non-zero exit, nothing on stdout', async () => {
    for (const args of [
      ['key', 'create', '--workspace', 'ws_nope', '--name', 'x', '--scopes', 'kb:read'],
      ['key', 'create', '--workspace', ws, '--name', 'x', '--scopes', 'kb:read,not:a-scope'],
      ['key', 'rotate', 'key_nope'],
      ['workspace', 'create'],
      ['frobnicate'],
    ]) {
      const res = await admin(...args);
      expect(res.code).not.toBe(0);
      expect(res.stdout).toBe('');
      expect(res.stderr).toMatch(/^error: /);
      // A wrong scope: the message lists the valid ones.
      if (args.includes('kb:read,not:a-scope')) expect(res.stderr).toContain(`unknown scope(s) not:a-scope; valid scopes: ${ALL_SCOPES.join(', ')}`);
    }
  }, 60_000);
  test('credential create: the token from --token-file or stdin, stored sealed; never from the command line', async () => {
    const fromFile = `EAAG${randomBytes(16).toString('hex')}`;
    const tokenFile = path.join(cliDataDir, 'token.txt');
    fs.writeFileSync(tokenFile, `${fromFile}\n`, { mode: 0o600 });
    const byFile = await admin('credential', 'create', '--workspace', ws, '--name', 'main number', '--token-file', tokenFile);
    expect(byFile.code).toBe(0);
    const created = JSON.parse(byFile.stdout);
    expect(created).toEqual({
      id: expect.stringMatching(/^cred_/),
      name: 'main number',
      provider: 'msgapp',
      settings: {},
      secret_field: 'access_token',
      last4: fromFile.slice(-4),
      fingerprint: expect.stringMatching(/^fp_[0-9a-f]{24}$/),
      created_at: expect.any(String),
    });
    expect(byFile.stdout + byFile.stderr).not.toContain(fromFile);

    const fromStdin = `EAAG${randomBytes(16).toString('hex')}`;
    const byStdin = await adminWith({ input: `${fromStdin}\n` }, 'credential', 'create', '--workspace', ws, '--name', 'second number');
    expect(byStdin.code).toBe(0);
    const second = JSON.parse(byStdin.stdout);

    const rows = await db.orm.em.fork().execute<{ id: string; secret_sealed: string }[]>('select id, secret_sealed from credentials where id in (?, ?)', [created.id, second.id]);
    const opened = Object.fromEntries(rows.map((r) => [r.id, cliBox().open(r.secret_sealed, r.id)]));
    expect(opened).toEqual({ [created.id]: fromFile, [second.id]: fromStdin });
    expect(JSON.stringify(rows)).not.toContain(fromFile);

    const before = await count('credentials');
    const onArgv = await admin('credential', 'create', '--workspace', ws, '--name', 'x', '--token', 'EAAGvisible-in-ps');
    expect(onArgv.code).toBe(2);
    expect(onArgv.stderr).toMatch(/^error: --token is not accepted: .*process list.*--token-file/);
    const empty = await adminWith({ input: '\n' }, 'credential', 'create', '--workspace', ws, '--name', 'x');
    expect(empty.code).not.toBe(0);
    expect(empty.stderr).toMatch(/access_token: must not be empty/);
    expect(await count('credentials')).toBe(before);
  }, 60_000);

  test('never a second encryption key: refused while the database holds sealed secrets, or with a key that does not open them', async () => {
    const agent = await a.services.agents.create(ws, { name: 'Key agent' });
    expect((await admin('site', 'create', '--workspace', ws, '--agent', agent.id, '--origins', 'https://k.example')).code).toBe(0);
    const sites = await count('sites');

    // Another data directory (the CLI run from elsewhere): no key there, sealed secrets in the database.
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-cli-elsewhere-'));
    try {
      const refused = await adminWith({ env: { CONCIERGE_DATA_DIR: elsewhere } }, 'site', 'create', '--workspace', ws, '--agent', agent.id, '--origins', 'https://k.example');
      expect(refused.code).toBe(1);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toMatch(/^error: refusing to generate a new encryption key: the database already holds \d+ secret\(s\) sealed/);
      expect(refused.stderr).toContain('CONCIERGE_ENCRYPTION_KEY');
      expect(fs.existsSync(path.join(elsewhere, 'encryption.key'))).toBe(false);

      // Commands that seal nothing still work there, and leave no key behind either.
      expect((await adminWith({ env: { CONCIERGE_DATA_DIR: elsewhere } }, 'key', 'list', '--workspace', ws)).code).toBe(0);
      expect(fs.existsSync(path.join(elsewhere, 'encryption.key'))).toBe(false);

      // A key that does not open the stored secrets is refused too, before anything is sealed with it.
      const wrong = await adminWith({ env: { CONCIERGE_ENCRYPTION_KEY: randomBytes(32).toString('hex') } }, 'site', 'create', '--workspace', ws, '--agent', agent.id, '--origins', 'https://k.example');
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toMatch(/^error: the encryption key from CONCIERGE_ENCRYPTION_KEY does not open the secrets already in the database/);
      expect(await count('sites')).toBe(sites);
    } finally {
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }
  }, 60_000);
});
