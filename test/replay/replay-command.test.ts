// `npm run replay`: histories exported from a running deployment replay against the current code.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { SecretBox } from '../../lib/crypto/secret-box';
import { findTemporalCli } from '../../dev/embedded/temporal';
import { purgeExpiredWorkflow } from '../../workflows';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { HISTORIES_DIR, startTestWorker, type TestWorker } from '../support/temporal';

const ROOT = path.resolve(__dirname, '../..');
const KEY = randomBytes(32).toString('hex');
const run = promisify(execFile);

/** The command as `npm run replay` runs it; resolves with its exit code and output. */
async function replay(args: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  try {
    // No key unless the test gives one: not this checkout's .data key, nor the environment's.
    const base = { ...process.env, CONCIERGE_ENCRYPTION_KEY: '', CONCIERGE_DATA_DIR: dir };
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'bin/replay.ts', ...args], { cwd: ROOT, timeout: 120_000, env: { ...base, ...env } });
    return { code: 0, out: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

let db: TestDatabase;
let tw: TestWorker;
let dir: string;
beforeAll(async () => {
  db = await createTestDatabase();
  // The worker encrypts what it writes with this key (lib/crypto/payload-codec.ts); the replay decodes with it.
  tw = await startTestWorker(db, { box: SecretBox.fromString(KEY) });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'replay-command-'));
}, 60_000);
afterAll(async () => {
  await tw.close();
  await db.drop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('every stored fixture replays (a directory stands for its *.json files): OK per file, exit 0', async () => {
  const fixtures = fs.readdirSync(HISTORIES_DIR).filter((f) => f.endsWith('.json'));
  const { code, out } = await replay(['--bundle', process.env.TEST_WORKFLOW_BUNDLE!, HISTORIES_DIR]);
  expect(out).toContain(`${fixtures.length} histories replayed`);
  for (const f of fixtures) expect(out).toMatch(new RegExp(`^OK +\\S*${f.replace('.', '\\.')} \\(\\w+\\)$`, 'm'));
  expect(code).toBe(0);
}, 120_000);

test('a history exported from the running server with `temporal workflow show --output json` replays', async () => {
  const workflowId = `replay-export-${Date.now()}`;
  await tw.client.workflow.execute(purgeExpiredWorkflow, { workflowId, taskQueue: tw.taskQueue });
  const cli = findTemporalCli({ install: false });
  const { stdout } = await run(cli, ['workflow', 'show', '-w', workflowId, '--output', 'json', '--address', process.env.TEST_TEMPORAL_ADDRESS!, '--namespace', 'default']);
  const file = path.join(dir, `${workflowId}.json`);
  fs.writeFileSync(file, stdout);
  // Its payloads are encrypted: the replay decodes them with CONCIERGE_ENCRYPTION_KEY, as the worker did.
  expect(stdout).toContain(Buffer.from('binary/encrypted').toString('base64'));
  const { code, out } = await replay(['--bundle', process.env.TEST_WORKFLOW_BUNDLE!, file], { CONCIERGE_ENCRYPTION_KEY: KEY });
  expect(out).toContain(`OK   ${file} (purgeExpiredWorkflow)`);
  expect(code).toBe(0);
  // Without the key it cannot read them, and says so.
  const keyless = await replay(['--bundle', process.env.TEST_WORKFLOW_BUNDLE!, file]);
  expect(keyless.out).toContain(`FAIL ${file}: purgeExpiredWorkflow: its payloads are encrypted (binary/encrypted): set CONCIERGE_ENCRYPTION_KEY`);
  expect(keyless.code).toBe(1);
  // Nor with another key: the payloads name a key id it does not hold.
  const other = await replay(['--bundle', process.env.TEST_WORKFLOW_BUNDLE!, file], { CONCIERGE_ENCRYPTION_KEY: randomBytes(32).toString('hex') });
  expect(other.out).toMatch(/^FAIL \S+: purgeExpiredWorkflow: its payloads are encrypted with key id g1-[0-9a-f]{12}, which the key given does not hold/m);
  expect(other.code).toBe(1);
}, 120_000);

test('an incompatible change to the workflow code fails the replay with the determinism error, exit 1', async () => {
  const { code, out } = await replay(['--workflows', 'test/replay/fixtures/changed-maintenance.ts', path.join(HISTORIES_DIR, 'purge-expired.json')]);
  expect(out).toMatch(/^FAIL \S*purge-expired\.json \(purgeExpiredWorkflow\): DeterminismViolationError: /m);
  expect(out).toContain('1 of 1 histories failed to replay');
  expect(code).toBe(1);
}, 120_000);

test('a file that is not a history fails with a reason; a missing path is a usage error (exit 2)', async () => {
  const junk = path.join(dir, 'junk.json');
  fs.writeFileSync(junk, JSON.stringify({ hello: 'world' }));
  const bad = await replay(['--bundle', process.env.TEST_WORKFLOW_BUNDLE!, junk]);
  expect(bad.out).toContain(`FAIL ${junk}: not a workflow history (no events)`);
  expect(bad.code).toBe(1);
  const missing = await replay([path.join(dir, 'nope.json')]);
  expect(missing.out).toContain('no such file or directory');
  expect(missing.code).toBe(2);
}, 60_000);

test("the Web UI's JSON API download ({history: {events}}) replays, against --workflows copied outside the checkout (packages resolve from this checkout)", async () => {
  const outside = path.join(dir, 'old-version', 'workflows');
  fs.cpSync(path.join(ROOT, 'workflows'), outside, { recursive: true });
  const events = JSON.parse(fs.readFileSync(path.join(HISTORIES_DIR, 'kb-index.json'), 'utf8')).events;
  const file = path.join(dir, 'kb-index-ui.json');
  fs.writeFileSync(file, JSON.stringify({ history: { events }, rawHistory: [], nextPageToken: '' }));
  const { code, out } = await replay(['--workflows', outside, file]);
  expect(out).toContain(`OK   ${file} (kbIndexWorkflow)`);
  expect(code).toBe(0);
}, 120_000);
