import { migratorOf } from '../../db/orm';
import { randomBytes } from 'node:crypto';
import { newId } from '../../lib/ids';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { recordSecret } from '../support/secret-log';

/**
 * The migration to provider credentials: a msgapp token stored before it (kind
 * `msgapp_access_token`, no fingerprint) is a msgapp credential afterwards, still opened
 * by agents and sends, and reads back through the API with a fingerprint computed on
 * first read.
 */
let db: TestDatabase;
let t: TestApp;
beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

test('a msgapp_access_token row from before keeps working as a msgapp credential', async () => {
  const migrator = await migratorOf(db.orm);
  await migrator.down({ to: 'Migration20261125160000SitePageCommands' });
  const ws = await createWorkspace(db.orm);
  const id = newId('cred');
  const token = `EAAG${randomBytes(20).toString('hex')}`;
  recordSecret('provider token', token);
  const em = db.orm.em.fork();
  await em.execute(`insert into credentials (id, workspace_id, kind, name, secret_sealed) values (?, ?, 'msgapp_access_token', 'old number', ?)`, [id, ws, t.services.box.seal(token, id)]);

  await migrator.up();
  expect(await t.services.credentials.hasMsgappToken(ws, id)).toBe(true);
  expect(await t.services.credentials.msgappToken(ws, id)).toBe(token);
  const auth = bearer((await createKey(t.services, ws, ['credentials:read'])).key);
  const res = await t.app.inject({ method: 'GET', url: `/api/v1/credentials/${id}`, headers: auth });
  expect(res.statusCode).toBe(200);
  expect(res.json()).toEqual({
    id,
    name: 'old number',
    provider: 'msgapp',
    settings: {},
    secret_field: 'access_token',
    last4: token.slice(-4),
    fingerprint: expect.stringMatching(/^fp_[0-9a-f]{24}$/),
    created_at: expect.any(String),
  });
  const [row] = await em.execute<{ provider: string; fingerprint: string | null }[]>('select provider, fingerprint from credentials where id = ?', [id]);
  expect(row).toEqual({ provider: 'msgapp', fingerprint: res.json().fingerprint });
  // The list reads it too (the keyset cursor works on the migrated created_at).
  const listed = await t.app.inject({ method: 'GET', url: '/api/v1/credentials', headers: auth });
  expect(listed.json()).toEqual({ credentials: [res.json()], next_cursor: null });
});
