import { Migration20261124000100SealIdempotentResponses } from '../../db/migrations/Migration20261124000100SealIdempotentResponses';
import { requestFingerprint } from '../../domain/idempotency/store';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

let db: TestDatabase;
let t: TestApp;
let auth: Record<string, string>;
let ws: string;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
  ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const post = (key: string | undefined, payload: unknown, headers = auth) =>
  t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: key === undefined ? headers : { ...headers, 'idempotency-key': key }, payload: payload as object });
const folderCount = async () => Number((await db.orm.em.fork().execute<{ n: string }[]>('select count(*) as n from kb_folders'))[0].n);

describe('Idempotency-Key on POST', () => {
  test('the same key and body replay the stored response without a second write', async () => {
    const first = await post('create-ops-1', { name: 'Ops' });
    expect(first.statusCode).toBe(201);
    const before = await folderCount();
    const again = await post('create-ops-1', { name: 'Ops' });
    expect(again.statusCode).toBe(201);
    expect(again.json()).toEqual(first.json());
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers['content-type']).toMatch(/application\/json/);
    expect(await folderCount()).toBe(before);
  });

  test('key order in the body does not matter; another body is 409 idempotency_conflict', async () => {
    const parent = (await post(undefined, { name: 'Parent' })).json();
    const first = await post('k-order', { name: 'Child', parent_id: parent.id });
    expect(first.statusCode).toBe(201);
    const reordered = await t.app.inject({
      method: 'POST',
      url: '/api/v1/kb/folders',
      headers: { ...auth, 'idempotency-key': 'k-order', 'content-type': 'application/json' },
      payload: `{"parent_id":"${parent.id}","name":"Child"}`,
    });
    expect(reordered.statusCode).toBe(201);
    expect(reordered.json().id).toBe(first.json().id);
    const other = await post('k-order', { name: 'Different' });
    expect(other.statusCode).toBe(409);
    expect(other.json()).toEqual({ error: 'idempotency_conflict', message: expect.stringContaining('different request') });
  });

  test('error responses are replayed too (the endpoint ran); validation failures are not stored', async () => {
    const missingParent = await post('k-404', { name: 'x', parent_id: 'fld_000000000000000000000000' });
    expect(missingParent.statusCode).toBe(404);
    const replay = await post('k-404', { name: 'x', parent_id: 'fld_000000000000000000000000' });
    expect(replay.statusCode).toBe(404);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toEqual(missingParent.json());

    const invalid = await post('k-invalid', { name: '' });
    expect(invalid.statusCode).toBe(400);
    const fixed = await post('k-invalid', { name: 'Valid now' });
    expect(fixed.statusCode).toBe(201);
    expect(fixed.headers['idempotent-replayed']).toBeUndefined();
  });

  test('keys are per workspace', async () => {
    const other = await createWorkspace(db.orm);
    const otherAuth = bearer((await createKey(t.services, other, ['kb:write'])).key);
    const mine = await post('shared-key', { name: 'Mine' });
    const theirs = await post('shared-key', { name: 'Theirs' }, otherAuth);
    expect(mine.statusCode).toBe(201);
    expect(theirs.statusCode).toBe(201);
    expect(theirs.json().id).not.toBe(mine.json().id);
  });

  test('concurrent requests with one key: one runs, the others are told or replayed, one folder results', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, () => post('k-concurrent', { name: 'Concurrent' })));
    const created = results.filter((r) => r.statusCode === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    expect(new Set(created.map((r) => r.json().id)).size).toBe(1);
    for (const r of results.filter((x) => x.statusCode !== 201)) {
      expect(r.statusCode).toBe(409);
      expect(r.json().error).toBe('idempotency_conflict');
    }
    const [{ n }] = await db.orm.em.fork().execute<{ n: string }[]>("select count(*) as n from kb_folders where name = 'Concurrent'");
    expect(Number(n)).toBe(1);
  });

  test('a malformed key is 400 invalid_request naming the header', async () => {
    for (const bad of ['', 'x'.repeat(256), 'has space', 'ünïcode']) {
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: { ...auth, 'idempotency-key': bad }, payload: { name: 'k' } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'invalid_request', message: expect.stringMatching(/^Idempotency-Key/) });
    }
  });

  test('expired keys are treated as unseen and purged', async () => {
    await post('k-expired', { name: 'Before' });
    await db.orm.em.fork().execute("update idempotency_keys set expires_at = now() - interval '1 second' where key = 'k-expired'");
    const after = await post('k-expired', { name: 'After' });
    expect(after.statusCode).toBe(201);
    expect(after.json().name).toBe('After');
    await db.orm.em.fork().execute("update idempotency_keys set expires_at = now() - interval '1 second' where key = 'k-expired'");
    expect(await t.services.idempotency.purgeExpired()).toBe(1);
    const [{ n }] = await db.orm.em.fork().execute<{ n: string }[]>("select count(*) as n from idempotency_keys where key = 'k-expired'");
    expect(Number(n)).toBe(0);
  });
  test('upgrade: stored responses written in plain text before sealing are deleted when they carry a secret; the others still replay', async () => {
    const fingerprint = requestFingerprint('POST', '/api/v1/kb/folders', { name: 'Legacy' });
    const legacy = JSON.stringify({ id: 'fld_legacy00000000000000000', name: 'Legacy' });
    const insert = (key: string, body: string) =>
      db.orm.em
        .fork()
        .execute(
          `insert into idempotency_keys (workspace_id, key, request_hash, state, response_status, response_body, response_content_type, expires_at)
           values (?, ?, ?, 'completed', 201, ?, 'application/json; charset=utf-8', now() + interval '1 hour')`,
          [ws, key, fingerprint, body],
        );
    await insert('legacy-plain', legacy);
    await insert('legacy-secret', JSON.stringify({ id: 'whk_legacy', secret: `whsec_${'a'.repeat(43)}` }));

    const migration = new Migration20261124000100SealIdempotentResponses(db.orm.em.getDriver(), db.orm.config);
    await migration.up();
    for (const query of migration.getQueries()) await db.orm.em.fork().execute(String(query));

    const keys = (await db.orm.em.fork().execute<{ key: string }[]>("select key from idempotency_keys where key like 'legacy-%' order by key")).map((r) => r.key);
    expect(keys).toEqual(['legacy-plain']);
    const replay = await post('legacy-plain', { name: 'Legacy' });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toEqual(JSON.parse(legacy));
  });
});
