import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../support/db';

// The production entries (what docker-compose.yml runs, from source here) refuse to start
// without CONCIERGE_ENCRYPTION_KEY: API and worker must share one key, so neither may fall
// back to a key file of its own, let alone generate one. (`npm start` still does, for the
// embedded default; test/api/keys.test.ts covers the admin CLI.)

const ROOT = path.resolve(__dirname, '../..');

let db: TestDatabase;
let dataDir: string;
beforeAll(async () => {
  db = await createTestDatabase();
  // A data directory holding a key file, as `npm start` leaves one: production must not use it either.
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-prod-key-'));
  fs.writeFileSync(path.join(dataDir, 'encryption.key'), randomBytes(32).toString('hex'), { mode: 0o600 });
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

function run(entry: string): Promise<{ code: number | null; output: string }> {
  const namespace = `prod-key-${randomBytes(4).toString('hex')}`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', entry], {
      cwd: ROOT,
      env: {
        ...process.env,
        NODE_ENV: 'production',
        CONCIERGE_ENCRYPTION_KEY: '',
        CONCIERGE_DATA_DIR: dataDir,
        DATABASE_URL: db.url,
        TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS,
        // Had it started, it would have touched nothing the other test files use.
        TEMPORAL_NAMESPACE: namespace,
        TEMPORAL_TASK_QUEUE: namespace,
        HOST: '127.0.0.1',
        PORT: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

test.each([
  ['API', 'api/main.ts', /^\[concierge\] API failed: CONCIERGE_ENCRYPTION_KEY is required/m],
  ['worker', 'worker/main.ts', /^\[concierge\] worker failed: CONCIERGE_ENCRYPTION_KEY is required/m],
])('the production %s refuses to start without CONCIERGE_ENCRYPTION_KEY, even with a key file in the data directory', async (_name, entry, message) => {
  const before = fs.readdirSync(dataDir);
  const { code, output } = await run(entry);
  expect(code).toBe(1);
  expect(output).toMatch(message);
  expect(output).not.toMatch(/API on http|worker polling/);
  expect(fs.readdirSync(dataDir)).toEqual(before);
}, 60_000);
