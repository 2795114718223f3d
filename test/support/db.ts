import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { Workspace } from '../../db/entities';
import { MikroORM } from '@mikro-orm/postgresql';
import { openDatabase, ormOptions, type Orm } from '../../db/orm';
import { newId } from '../../lib/ids';

export const TEST_PG_URL = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  orm: Orm;
  /** Closes the ORM and drops the database (with any connection still open on it). */
  drop(): Promise<void>;
}

/**
 * The run's migrated database (global-setup.ts makes it once): each file's database is a copy of it (`create
 * database … template`, a file copy in the server), where migrating each one from nothing cost every test file a
 * second of CPU and the migrator's 400 modules.
 */
const TEMPLATE = process.env.TEST_TEMPLATE_DB;
const run = promisify(execFile);

/** A fresh, migrated database on the server of `adminUrl` (its maintenance database). */
export async function createScratchDatabase(prefix: string, adminUrl: string): Promise<TestDatabase> {
  const name = `${prefix}${randomBytes(6).toString('hex')}`;
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  let orm: Orm;
  if (TEMPLATE && adminUrl === TEST_PG_URL) {
    await adminQuery(adminUrl, `create database "${name}" template "${TEMPLATE}"`);
    orm = await MikroORM.init(ormOptions(url.toString()));
  } else {
    orm = await openDatabase(url.toString());
  }
  return {
    url: url.toString(),
    orm,
    drop: async () => {
      await orm.close(true);
      await adminQuery(adminUrl, `drop database if exists "${name}" with (force)`);
    },
  };
}

export async function adminQuery(adminUrl: string, sql: string): Promise<void> {
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}

/** The run's template (global-setup.ts): a database migrated once, closed, for createScratchDatabase to copy. */
export async function createTemplateDatabase(): Promise<string> {
  const name = `concierge_template_${randomBytes(6).toString('hex')}`;
  const url = new URL(TEST_PG_URL);
  url.pathname = `/${name}`;
  // In a child under tsx: Jest's global setup requires natively, and the migrator's list loads by import() of its
  // compiled name (db/orm.ts), which tsx maps to the source and Jest's test processes map with moduleNameMapper.
  await run(process.execPath, ['--import', 'tsx', '-e', "require('./db/orm').openDatabase(process.argv[1]).then((orm) => orm.close(true))", url.toString()], {
    cwd: path.resolve(__dirname, '../..'),
    timeout: 120_000,
  });
  return name;
}

/** A fresh database for one test file, migrated; dropped (with its connections) at the end. */
export const createTestDatabase = () => createScratchDatabase('concierge_test_', TEST_PG_URL);

export async function createWorkspace(orm: Orm, name = 'Test workspace'): Promise<string> {
  const em = orm.em.fork();
  const ws = em.create(Workspace, { id: newId('ws'), name });
  await em.flush();
  return ws.id;
}
