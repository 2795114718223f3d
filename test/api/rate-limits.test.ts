import { Redis } from 'ioredis';
import { Pool } from 'pg';
import { openDatabase, type Orm } from '../../db/orm';
import type { RateStore } from '../../lib/ratelimit';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

let db: TestDatabase;
let redis: Redis;
let pool: Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  redis = new Redis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true });
  await redis.connect();
  pool = new Pool({ connectionString: db.url, max: 4 });
});
afterAll(async () => {
  redis.disconnect();
  await pool.end();
  await db.drop();
});

const WINDOW_SECONDS = 2;
const get = (t: TestApp, key: string) => t.app.inject({ method: 'GET', url: '/api/v1/kb/folders', headers: bearer(key) });

describe.each([
  ['Redis', (): RateStore => ({ kind: 'redis', client: redis })],
  ['PostgreSQL', (): RateStore => ({ kind: 'postgres', pool })],
])('rate limits shared by two API processes through %s', (_name, store) => {
  let a: TestApp;
  let b: TestApp;
  beforeAll(async () => {
    const opts = { orm: db.orm, databaseUrl: db.url, rateStore: store(), perKey: 4, perWorkspace: 6, windowSeconds: WINDOW_SECONDS };
    a = await startTestApp(opts);
    b = await startTestApp(opts);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  test('per key: the limit holds across both processes, 429 + Retry-After, then success after the window', async () => {
    const ws = await createWorkspace(db.orm);
    const { key } = await createKey(a.services, ws, ['kb:read']);
    const codes = [];
    for (let i = 0; i < 6; i++) codes.push((await get(i % 2 ? b : a, key)).statusCode);
    expect(codes).toEqual([200, 200, 200, 200, 429, 429]);
    const limited = await get(a, key);
    expect(limited.json().error).toBe('rate_limited');
    const retryAfter = Number(limited.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(WINDOW_SECONDS);
    await new Promise((r) => setTimeout(r, retryAfter * 1000 + 100));
    expect((await get(b, key)).statusCode).toBe(200);
  });

  test('per workspace: keys of one workspace share its budget; another workspace is unaffected', async () => {
    const ws = await createWorkspace(db.orm);
    const k1 = (await createKey(a.services, ws, ['kb:read'])).key;
    const k2 = (await createKey(a.services, ws, ['kb:read'])).key;
    const codes = [];
    for (let i = 0; i < 4; i++) codes.push((await get(a, k1)).statusCode);
    for (let i = 0; i < 3; i++) codes.push((await get(b, k2)).statusCode);
    expect(codes).toEqual([200, 200, 200, 200, 200, 200, 429]);
    const limited = await get(b, k2);
    expect(limited.headers['x-ratelimit-limit']).toBe('6');
    expect(limited.json().message).toMatch(/workspace/);
    const other = await createWorkspace(db.orm);
    expect((await get(a, (await createKey(a.services, other, ['kb:read'])).key)).statusCode).toBe(200);
  });

  test('concurrent requests never exceed the limit', async () => {
    const ws = await createWorkspace(db.orm);
    const { key } = await createKey(a.services, ws, ['kb:read']);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => get(i % 2 ? a : b, key)));
    expect(results.filter((r) => r.statusCode === 200)).toHaveLength(4);
    expect(results.filter((r) => r.statusCode === 429)).toHaveLength(8);
  });
});

describe('widget: an address that keeps presenting unknown sites or refused origins', () => {
  let t: TestApp;
  let orm: Orm;
  let siteId: string;
  const ORIGIN = 'https://shop.example';
  const init = (site: string, origin = ORIGIN) => t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': site, origin }, payload: {} });

  beforeAll(async () => {
    // Its own ORM, so every database query this app makes is counted here and nowhere else.
    orm = await openDatabase(db.url);
    t = await startTestApp({ orm, databaseUrl: db.url, windowSeconds: WINDOW_SECONDS, widgetLimits: { perSiteClient: 1_000, sendsPerConversation: 100, refusalsPerAddress: 3 } });
    const ws = await createWorkspace(db.orm);
    const auth = bearer((await createKey(t.services, ws, ['workflows:write', 'workflows:publish'])).key);
    const agent = await t.app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth, payload: { name: 'Shop', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [ORIGIN] } } } });
    await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.json().id}/publish`, headers: auth });
    siteId = (await t.services.sites.create(ws, agent.json().id, [ORIGIN])).site_id;
  });
  afterAll(async () => {
    await t.close();
    await orm.close();
  });

  test('gets 429 rate_limited with Retry-After before any database query, until the window ends', async () => {
    const queries = jest.spyOn(orm.em.getDriver().getConnection(), 'execute');
    try {
      expect((await init('site_000000000000000000000000')).json().error).toBe('unknown_site');
      expect((await init(siteId, 'https://evil.example')).json().error).toBe('origin_not_allowed');
      expect((await init('site_111111111111111111111111')).json().error).toBe('unknown_site');
      // The spy sees the lookups: each refusal above queried the sites table (the ORM quotes the name).
      expect(queries.mock.calls.filter(([sql]) => /\bfrom "?sites\b/.test(String(sql)))).toHaveLength(3);
      queries.mockClear();
      const limited = await init('site_222222222222222222222222');
      expect(limited.statusCode).toBe(429);
      expect(limited.json()).toEqual({ error: 'rate_limited', message: expect.stringContaining('refused') });
      expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      // The right site and origin from that address wait too: answered from memory, no query at all.
      expect((await init(siteId)).statusCode).toBe(429);
      expect(queries).not.toHaveBeenCalled();
      await new Promise((r) => setTimeout(r, Number(limited.headers['retry-after']) * 1000 + 100));
      expect((await init(siteId)).statusCode).toBe(200);
    } finally {
      queries.mockRestore();
    }
  });
});
