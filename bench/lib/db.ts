import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import type { Scope } from '../../core/auth/scopes';
import { Workspace } from '../../core/db/entities';
import { openDatabase, type Orm } from '../../core/db/orm';
import { newId } from '../../core/ids';
import type { Services } from '../../core/services';

/** The server the scratch databases are created on (BENCH_PG_URL; the maintenance database). */
export const BENCH_PG_URL = process.env.BENCH_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
/** Redis for the sections that use it (BENCH_REDIS_URL). */
export const BENCH_REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface BenchDatabase {
  url: string;
  orm: Orm;
  /** Closes the ORM and drops the database (with any connection still open on it). */
  drop(): Promise<void>;
}

/** A fresh, migrated database for one section. */
export async function createBenchDatabase(): Promise<BenchDatabase> {
  const name = `concierge_bench_${randomBytes(6).toString('hex')}`;
  const url = new URL(BENCH_PG_URL);
  url.pathname = `/${name}`;
  const orm = await openDatabase(url.toString());
  return {
    url: url.toString(),
    orm,
    drop: async () => {
      await orm.close(true);
      const admin = new Client({ connectionString: BENCH_PG_URL });
      await admin.connect();
      try {
        await admin.query(`drop database if exists "${name}" with (force)`);
      } finally {
        await admin.end();
      }
    },
  };
}

export async function createWorkspace(orm: Orm, name = 'Bench workspace'): Promise<string> {
  const em = orm.em.fork();
  const ws = em.create(Workspace, { id: newId('ws'), name });
  await em.flush();
  return ws.id;
}

export async function createKey(services: Services, workspaceId: string, scopes: Scope[]): Promise<{ id: string; key: string }> {
  const created = await services.apiKeys.create(workspaceId, 'bench key', scopes);
  return { id: created.id, key: created.key };
}
