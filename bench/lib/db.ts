import type { Scope } from '../../core/auth/scopes';
import type { Services } from '../../core/services';
import { createScratchDatabase, type TestDatabase } from '../../test/support/db';

/** The server the scratch databases are created on (BENCH_PG_URL; the maintenance database). */
export const BENCH_PG_URL = process.env.BENCH_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
/** Redis for the sections that use it (BENCH_REDIS_URL). */
export const BENCH_REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

export type BenchDatabase = TestDatabase;

/** A fresh, migrated database for one section. */
export const createBenchDatabase = (): Promise<BenchDatabase> => createScratchDatabase('concierge_bench_', BENCH_PG_URL);

/** Workspaces are made the same way as in the tests. */
export { createWorkspace } from '../../test/support/db';

export async function createKey(services: Services, workspaceId: string, scopes: Scope[]): Promise<{ id: string; key: string }> {
  const created = await services.apiKeys.create(workspaceId, 'bench key', scopes);
  return { id: created.id, key: created.key };
}
