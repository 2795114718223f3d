import { spawn } from 'node:child_process';
import path from 'node:path';
import { dialOutPolicy } from '../../core/voice/destinations';
import { createTestDatabase, createWorkspace, type TestDatabase } from '../support/db';

/** The operator sets a workspace's dial-out destinations with the admin CLI; they live on the workspace row. */
const ROOT = path.resolve(__dirname, '../..');
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

function admin(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bin/admin.ts', ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: db.url, CONCIERGE_ENCRYPTION_KEY: '' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

test('workspace set-dial-out stores allowed countries and types on the workspace; "all" and "default" restore the defaults; premium-rate is refused', async () => {
  const ws = await createWorkspace(db.orm);
  const set = await admin(['workspace', 'set-dial-out', ws, '--countries', 'us,GB', '--types', 'fixed_line,mobile']);
  expect(set.code).toBe(0);
  expect(JSON.parse(set.stdout)).toEqual({ workspace_id: ws, countries: ['GB', 'US'], types: ['fixed_line', 'mobile'] });
  expect(await dialOutPolicy(db.orm.em, ws)).toEqual({ countries: ['GB', 'US'], types: ['fixed_line', 'mobile'] });
  const refused = await admin(['workspace', 'set-dial-out', ws, '--types', 'premium_rate']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('invalid_request');
  const reset = await admin(['workspace', 'set-dial-out', ws, '--countries', 'all', '--types', 'default']);
  expect(reset.code).toBe(0);
  expect(await dialOutPolicy(db.orm.em, ws)).toEqual({ countries: null, types: ['fixed_line', 'mobile', 'toll_free', 'voip', 'uan'] });
  expect((await admin(['workspace', 'set-dial-out', 'ws_missing', '--countries', 'US'])).stderr).toContain('not_found');
}, 120_000);
