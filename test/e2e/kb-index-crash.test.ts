import { randomBytes } from 'node:crypto';
import { bearer, createKey, createWorkspace, MODELS_DIR, startTestApp, testBlobs, type TestApp } from '../support/app';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { makeBigPdf } from '../../dev/fakes/documents';
import { SecretBox } from '../../lib/crypto/secret-box';
import { upload } from '../support/kb';
import { eventually, WorkerProcesses } from '../support/worker-process';

/** One key for the API and the worker: the worker refuses to start on a key that cannot open what the API sealed (the API key's value, kept for the console's copy). */
const KEY = randomBytes(32).toString('hex');
let db: TestDatabase;
let t: TestApp;
let workers: WorkerProcesses;
let auth: Record<string, string>;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, serviceOptions: { box: SecretBox.fromString(KEY) } });
  const ws = await createWorkspace(db.orm);
  auth = bearer((await createKey(t.services, ws, ['kb:read', 'kb:write'])).key);
  workers = new WorkerProcesses(`kbcrash-${randomBytes(4).toString('hex')}`, {
    DATABASE_URL: db.url,
    CONCIERGE_ENCRYPTION_KEY: KEY,
    // The worker reads the bytes the API stored.
    CONCIERGE_STORAGE_DIR: testBlobs.root,
    CONCIERGE_MODELS_DIR: MODELS_DIR,
  });
  await workers.registerNamespace();
});
afterAll(async () => {
  await workers.stopAll();
  await t.close();
  await db.drop();
});

const fileRow = async (id: string) =>
  (await db.orm.em.fork().execute<{ status: string; chunk_count: number; error_message: string | null }[]>('select status, chunk_count, error_message from kb_files where id = ?', [id]))[0];
const chunkStats = async (id: string) =>
  (await db.orm.em.fork().execute<{ n: string; distinct_ordinals: string; embedded: string }[]>(
    'select count(*) as n, count(distinct ordinal) as distinct_ordinals, count(embedding) as embedded from kb_chunks where file_id = ?',
    [id],
  ))[0];

test('a worker killed during indexing: after a restart the file ends active with exactly one set of chunks', async () => {
  // Uploaded while no worker runs: the indexing outbox keeps it until one does.
  const res = await upload(t.app, auth, { filename: 'handbook.pdf', content: await makeBigPdf(120) });
  expect(res.statusCode).toBe(201);
  const id = res.json().id;

  const first = await workers.start();
  await eventually(60_000, 'indexing to be under way', async () => (await fileRow(id)).status === 'processing');
  await workers.kill(first);
  expect((await fileRow(id)).status).toBe('processing');

  await workers.start();
  const done = await eventually(120_000, 'indexing to finish after the restart', async () => {
    const row = await fileRow(id);
    return row.status === 'active' || row.status === 'error' ? row : undefined;
  });
  expect(done).toMatchObject({ status: 'active', error_message: null });
  const stats = await chunkStats(id);
  expect(Number(stats.n)).toBe(done.chunk_count);
  expect(Number(stats.distinct_ordinals)).toBe(done.chunk_count);
  expect(Number(stats.embedded)).toBe(done.chunk_count);
}, 180_000);
