import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Workspace } from '../../db/entities';
import { openDatabase, type Orm } from '../../db/orm';
import { newId } from '../../lib/ids';

export const TEST_PG_URL = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  orm: Orm;
  /** Closes the ORM and drops the database (with any connection still open on it). */
  drop(): Promise<void>;
}

/** A fresh, migrated database on the server of `adminUrl` (its maintenance database). */
export async function createScratchDatabase(prefix: string, adminUrl: string): Promise<TestDatabase> {
  const name = `${prefix}${randomBytes(6).toString('hex')}`;
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const orm = await openDatabase(url.toString());
  return {
    url: url.toString(),
    orm,
    drop: async () => {
      await orm.close(true);
      const admin = new Client({ connectionString: adminUrl });
      await admin.connect();
      try {
        await admin.query(`drop database if exists "${name}" with (force)`);
      } finally {
        await admin.end();
      }
    },
  };
}

/** A fresh database for one test file, migrated; dropped (with its connections) at the end. */
export const createTestDatabase = () => createScratchDatabase('concierge_test_', TEST_PG_URL);

export async function createWorkspace(orm: Orm, name = 'Test workspace'): Promise<string> {
  const em = orm.em.fork();
  const ws = em.create(Workspace, { id: newId('ws'), name });
  await em.flush();
  return ws.id;
}
