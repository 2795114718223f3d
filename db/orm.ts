import { MikroORM, type Options } from '@mikro-orm/postgresql';
import type { Migrator } from '@mikro-orm/migrations';
import { Client } from 'pg';
import { allEntities } from './entities';

export type Orm = MikroORM;

export function ormOptions(databaseUrl: string, overrides: Partial<Options> = {}): Options {
  return {
    clientUrl: databaseUrl,
    entities: allEntities,
    migrations: { transactional: true, allOrNothing: true, snapshot: false, silent: true },
    discovery: { warnWhenNoEntities: false },
    debug: false,
    pool: { min: 0, max: 10 },
    ...overrides,
  };
}

/** Creates the database named in the URL when it is missing (connecting to `postgres`). */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) throw new Error('DATABASE_URL names no database');
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (!rowCount) {
      try {
        await client.query(`create database "${name.replace(/"/g, '""')}"`);
      } catch (err) {
        // Another process created it between our check and our create.
        if ((err as { code?: string }).code !== '42P04') throw err;
      }
    }
  } finally {
    await client.end();
  }
}

/** Connects, creating the database and applying pending migrations first. */
export async function openDatabase(databaseUrl: string, overrides: Partial<Options> = {}): Promise<Orm> {
  await ensureDatabase(databaseUrl);
  const orm = await MikroORM.init(ormOptions(databaseUrl, overrides));
  await migrate(orm, databaseUrl);
  return orm;
}

export async function migrate(orm: Orm, databaseUrl: string): Promise<void> {
  // A session advisory lock keeps two processes that start together from racing
  // through the same migrations.
  const lock = new Client({ connectionString: databaseUrl });
  await lock.connect();
  try {
    await lock.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
    await (await migratorOf(orm)).up();
  } finally {
    await lock.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => undefined);
    await lock.end();
  }
}

/**
 * The schema migrator, loaded when a migration runs rather than with every process that opens the database (umzug
 * and its command-line parser are some 400 modules that the API and the tests otherwise never use).
 */
export async function migratorOf(orm: Orm): Promise<Migrator> {
  const [{ Migrator: Loaded }, { migrations }] = await Promise.all([import('@mikro-orm/migrations'), import('./migrations/index.js')]);
  orm.config.set('migrations', { ...orm.config.get('migrations'), migrationsList: migrations });
  return new Loaded(orm.em);
}

const MIGRATION_LOCK_ID = 0x436f6e63; // "Conc"
