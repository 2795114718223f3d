import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { hashApiKey } from '../../core/auth/api-keys';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');

let db: TestDatabase;
let a: TestApp;
let b: TestApp;
let ws: string;

beforeAll(async () => {
  db = await createTestDatabase();
  // Two API processes' worth of state: each has its own key cache and listener.
  a = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  b = await startTestApp({ orm: db.orm, databaseUrl: db.url });
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

describe('admin CLI', () => {
  const admin = async (...args: string[]) => {
    try {
      const { stdout, stderr } = await run('node', ['--import', 'tsx', 'bin/admin.ts', ...args], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: db.url },
      });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

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
    }
  }, 60_000);
});
