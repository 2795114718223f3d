import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { isListening, waitFor } from '../../dev/embedded/ports';

/**
 * The test run's PostgreSQL and Redis: whatever answers at their URLs (TEST_DATABASE_URL, TEST_REDIS_URL, else
 * 127.0.0.1:5432 and :6379), else started here — PostgreSQL through Debian's cluster tools (the same command an
 * operator runs; it stays up like the system service it is), Redis as a child of the run, stopped at teardown.
 * So `npm test` never depends on a service someone started by hand.
 */
export interface TestServices {
  stop(): Promise<void>;
}

const PG_URL = new URL(process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres');
const REDIS_URL = new URL(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379');

export async function ensureTestServices(): Promise<TestServices> {
  await ensurePostgres();
  const redis = await ensureRedis();
  return {
    stop: async () => {
      if (redis && redis.exitCode === null) {
        const exited = new Promise((resolve) => redis.once('exit', resolve));
        redis.kill('SIGTERM');
        await exited;
      }
    },
  };
}

async function ensurePostgres(): Promise<void> {
  const host = PG_URL.hostname;
  const port = Number(PG_URL.port || 5432);
  if (await isListening(host, port)) return;
  if (!isLocal(host)) throw new Error(`PostgreSQL does not answer at ${host}:${port} (TEST_DATABASE_URL)`);
  // `pg_lsclusters` lines: "15  main    5432 down   postgres /var/lib/postgresql/15/main ..."
  let clusters: string[][];
  try {
    clusters = execFileSync('pg_lsclusters', ['--no-header'], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map((line) => line.trim().split(/\s+/));
  } catch {
    throw new Error(`PostgreSQL does not answer at ${host}:${port} and Debian's cluster tools are missing: run 'npm run setup'`);
  }
  const cluster = clusters.find((c) => Number(c[2]) === port);
  if (!cluster) throw new Error(`PostgreSQL does not answer at ${host}:${port} and no local cluster uses that port (pg_lsclusters)`);
  console.log(`[tests] starting PostgreSQL ${cluster[0]}/${cluster[1]} on port ${port}`);
  execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', cluster[0], cluster[1], 'start'], { stdio: 'inherit' });
  await waitFor(() => isListening(host, port), 30_000, `PostgreSQL at ${host}:${port}`);
}

async function ensureRedis(): Promise<ChildProcess | null> {
  const host = REDIS_URL.hostname;
  const port = Number(REDIS_URL.port || 6379);
  if (await isListening(host, port)) return null;
  if (!isLocal(host)) throw new Error(`Redis does not answer at ${host}:${port} (TEST_REDIS_URL)`);
  const dir = fs.mkdtempSync('/tmp/concierge-test-redis-');
  console.log(`[tests] starting redis-server on ${host}:${port}`);
  const child = spawn('redis-server', ['--bind', host, '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir], {
    stdio: 'ignore',
  });
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(new Error(`cannot start redis-server (run 'npm run setup'): ${err.message}`)));
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code} before answering on ${host}:${port}`)));
  });
  failed.catch(() => undefined); // observed below; after the race, a late failure is the teardown's concern
  await Promise.race([waitFor(() => isListening(host, port), 15_000, `Redis at ${host}:${port}`), failed]);
  child.removeAllListeners('exit');
  return child;
}

const isLocal = (host: string) => host === '127.0.0.1' || host === 'localhost' || host === '::1';
