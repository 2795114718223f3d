import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { openDatabase, type Orm } from '../../core/db/orm';

export const TEST_PG_URL = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  orm: Orm;
  drop(): Promise<void>;
}

/** A fresh database for one test file, migrated; dropped (with its connections) at the end. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `concierge_test_${randomBytes(6).toString('hex')}`;
  const url = new URL(TEST_PG_URL);
  url.pathname = `/${name}`;
  const orm = await openDatabase(url.toString());
  return {
    url: url.toString(),
    orm,
    drop: async () => {
      await orm.close(true);
      const admin = new Client({ connectionString: TEST_PG_URL });
      await admin.connect();
      try {
        await admin.query(`drop database if exists "${name}" with (force)`);
      } finally {
        await admin.end();
      }
    },
  };
}
