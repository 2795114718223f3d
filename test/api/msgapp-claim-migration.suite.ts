import { migratorOf } from '../../db/orm';
import { newId } from '../../lib/ids';
import { createWorkspace } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';

/**
 * The migration that makes a msgapp number one agent's: an installation that already has
 * double claims, or agents naming a credential their workspace does not have, upgrades
 * without failing, and inbound routing keeps the agent it chose before (first published).
 */
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

test('existing double claims: the first-published agent keeps the number; a missing credential stops a claim; then the index holds', async () => {
  const migrator = await migratorOf(db.orm);
  await migrator.down({ to: 'Migration20261122000800Chat' });
  const em = db.orm.em.fork();
  const [wsA, wsB] = [await createWorkspace(db.orm), await createWorkspace(db.orm)];
  const credA = newId('cred');
  await em.execute(`insert into credentials (id, workspace_id, kind, name, secret_sealed) values (?, ?, 'msgapp_access_token', 'a', 'sealed')`, [credA, wsA]);
  const agent = async (ws: string, publishedAt: string, credentialId: string | null) => {
    const id = newId('agt');
    const spec = { name: 'x', triggers: { msgapp: { number: '+15550100001', phone_number_id: '777', ...(credentialId ? { credential_id: credentialId } : {}) } } };
    await em.execute(`insert into agents (id, workspace_id, name, status, spec, published_at) values (?, ?, 'x', 'published', ?::jsonb, ?::timestamptz)`, [id, ws, JSON.stringify(spec), publishedAt]);
    return id;
  };
  const first = await agent(wsA, '2026-01-01T00:00:00Z', credA);
  const second = await agent(wsA, '2026-01-02T00:00:00Z', credA);
  const foreignCred = await agent(wsB, '2025-12-01T00:00:00Z', credA); // earliest, but A's credential used from B

  await migrator.up();
  const rows = await em.execute<{ id: string; invalid_reasons: string[] }[]>(`select id, invalid_reasons from agents`);
  const reasons = Object.fromEntries(rows.map((r) => [r.id, r.invalid_reasons]));
  expect(reasons[first]).toEqual([]);
  expect(reasons[second]).toEqual(['msgapp phone_number_id 777 is in use by another agent']);
  expect(reasons[foreignCred]).toEqual([`credential ${credA} does not exist in this workspace`]);
  await expect(
    em.execute(`update agents set invalid_reasons = '{}' where id = ?`, [second]),
  ).rejects.toThrow(/agents_msgapp_claim_uq/);
});
