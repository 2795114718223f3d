import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { findWheelBinary } from '../../dev/embedded/temporal';
import { ALL_SCOPES } from '../../domain/keys/scopes';
import { DEFAULT_STRUCTURED } from '../../domain/extraction/extractions';
import { CloudApiProvider } from '../../providers/msgapp/cloud-api';
import { startMsgappSandbox, type MsgappSandbox } from '../../dev/fake-msgapp';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';
import { echoReply, startFakeLlm, type FakeLlm } from '../../dev/fakes/fake-llm';
import { startTestWorker } from '../support/temporal';

/**
 * Property-based fuzzing of the whole HTTP surface from the served openapi.json, with
 * Schemathesis (PyPI `schemathesis`, installed by npm run setup): every operation, with
 * schema-valid and schema-invalid inputs, must never answer 5xx (but a 501 the document
 * declares), and every response must match the schema and status the document gives. The
 * seed, the examples per operation and the wall-clock budget are fixed so a run is repeatable.
 *
 * Two strengths: this file in `npm test` (5 examples per operation, three checks) and
 * `npm run fuzz` (25 examples per operation and every check Schemathesis has, FUZZ_CHECKS=all).
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261124);
const MAX_EXAMPLES = Number(process.env.FUZZ_MAX_EXAMPLES ?? 5);
// The suite runs the documented examples and the coverage phase (every schema's boundaries and each refusal); the
// random phase, ten seconds of CPU in a CPU-bound suite, is `npm run fuzz`'s (FUZZ_PHASES there).
const PHASES = process.env.FUZZ_PHASES ?? 'examples,coverage';
/**
 * The suite's checks; `npm run fuzz` runs them all (FUZZ_CHECKS=all). Schemathesis's positive-data check (ST202)
 * is replaced by its exact form for this API, `documented_refusals_only` (test/support/fuzz_checks.py): valid
 * input may be refused only by a rule the document states and a JSON Schema cannot (between two values, on state,
 * on content, on the network), each listed there with its status and error code.
 */
const CHECKS = process.env.FUZZ_CHECKS ?? 'not_a_server_error,response_schema_conformance,status_code_conformance,documented_refusals_only';
/**
 * Operations left out of the suite's run: the console's (`/api/console/*`) are signed-in sessions' (a cookie and a
 * CSRF token), which a fuzzer holding an API key meets only as 401 not_signed_in; the suite spends its time on the
 * contract. `npm run fuzz` runs every operation (FUZZ_EXCLUDE_PATHS empty).
 */
const EXCLUDE_PATHS = process.env.FUZZ_EXCLUDE_PATHS ?? '^/api/console/';
/**
 * The suite's hooks: the check above and, with FUZZ_ENUM_SAMPLE, a sample of each large enum's values in the coverage
 * phase (test/support/fuzz_suite.py: 20 of 419 time zones were ~760 of ~7,500 cases, the same path each); `npm run
 * fuzz` (FUZZ_CHECKS=all) sends every value unless FUZZ_ENUM_SAMPLE says otherwise.
 */
const HOOKS = path.join(__dirname, '..', 'support', 'fuzz_suite.py');
const ENUM_SAMPLE = process.env.FUZZ_ENUM_SAMPLE ?? (CHECKS.split(',').includes('all') ? '' : '20');
/** Wall-clock cap of the Schemathesis run: past it the run is killed and the test fails, so a slow-down shows instead of stretching CI. */
const MAX_SECONDS = Number(process.env.FUZZ_MAX_SECONDS ?? 360);
const ORIGIN = 'https://shop.example';

let db: TestDatabase;
let llm: FakeLlm;
let sandbox: MsgappSandbox;
let t: TestApp;
let tw: Awaited<ReturnType<typeof startTestWorker>>;
let base: string;
let key: string;
let siteId: string;
/** Real resources, so operations on `{id}` reach their handlers instead of stopping at 404. */
let seeded: { agent: string; folder: string; customer: string; conversation: string };

beforeAll(async () => {
  db = await createTestDatabase();
  // Every dependency an operation needs is real or a real fake on loopback, so a 5xx is a fault, never "not configured".
  // As a real model would: a JSON draft when asked for JSON (POST /api/v1/agents/generate), text otherwise.
  llm = await startFakeLlm({
    reply: (body) =>
      body?.response_format?.type === 'json_object'
        ? { text: JSON.stringify({ name: 'Drafted helper', instructions: 'Answer from the knowledge base; hand over when unsure.', actions: [{ type: 'kb_search' }, { type: 'handoff' }] }) }
        : echoReply(body),
  });
  sandbox = await startMsgappSandbox({ appSecret: 'fuzz-secret' });
  const serviceOptions = {
    llm: { baseUrl: llm.url, model: 'fake-model' },
    structured: { ...DEFAULT_STRUCTURED, llm: { baseUrl: llm.url, model: 'fake-model' } },
    msgapp: new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 5_000 }),
  };
  tw = await startTestWorker(db, serviceOptions);
  t = await startTestApp({
    orm: db.orm,
    databaseUrl: db.url,
    temporal: { client: tw.client, taskQueue: tw.taskQueue },
    serviceOptions,
    msgappWebhook: { appSecret: 'fuzz-secret', verifyToken: 'fuzz-verify' },
    // The fuzzer's keys and hashes are generated junk (repeated in non-secret fields), not secrets to scan for.
    recordPresented: false,
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const ws = await createWorkspace(db.orm);
  key = (await createKey(t.services, ws, ALL_SCOPES)).key;
  const auth = bearer(key);
  const agent = await t.app.inject({
    method: 'POST',
    url: '/api/v1/agents',
    headers: auth,
    payload: { name: 'Fuzz helper', instructions: 'Help.', triggers: { web_chat: { allowed_origins: [ORIGIN], file_upload: true } } },
  });
  await t.app.inject({ method: 'POST', url: `/api/v1/agents/${agent.json().id}/publish`, headers: auth });
  siteId = (await t.services.sites.create(ws, agent.json().id, [ORIGIN])).site_id;
  const folder = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: auth, payload: { name: 'Policies' } });
  const customer = await t.app.inject({ method: 'POST', url: '/api/v1/customers', headers: auth, payload: { email: 'fuzz@example.com' } });
  const init = await t.app.inject({ method: 'POST', url: '/api/public/widget/init', headers: { 'x-concierge-site': siteId, origin: ORIGIN }, payload: {} });
  seeded = { agent: agent.json().id, folder: folder.json().id, customer: customer.json().id, conversation: init.json().conversation_id };
  expect(Object.values(seeded).every((id) => typeof id === 'string')).toBe(true);
}, 60_000);

afterAll(async () => {
  await t.close();
  await tw.close();
  await sandbox.close();
  await llm.close();
  await db.drop();
});

/**
 * Schemathesis's environment: what Python and its tools need, nothing else. `requests` reads the proxy variables out of
 * the whole environment, twice, for every request (urllib's getproxies_environment): with Jest's environment that was
 * ~7 % of Schemathesis's profiled time over ~7,500 requests; and a proxy set for the machine must not carry loopback calls.
 */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(PATH|HOME|TMPDIR|LANG|LC_\w+|TZ|LD_LIBRARY_PATH|VIRTUAL_ENV|CONDA_PREFIX|PYENV_\w+|PYTHON\w*|SCHEMATHESIS_\w+)$/.test(k)) env[k] = v;
  }
  return { ...env, NO_COLOR: '1', SCHEMATHESIS_TELEMETRY: 'false', SCHEMATHESIS_HOOKS: HOOKS, FUZZ_ENUM_SAMPLE: ENUM_SAMPLE };
}

function run(cmd: string, args: string[], timeoutMs: number, cwd: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, env: childEnv() }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, out: `${stdout}\n${stderr}` });
    });
  });
}

test('fuzzing every operation of openapi.json: no 5xx, every response matches its documented schema', async () => {
  const st = findWheelBinary('st', 'schemathesis', { explicit: process.env.SCHEMATHESIS_PATH });
  const reportDir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-fuzz-'));
  // Schemathesis's per-operation parameters: each `{id}` path of a seeded resource uses its real id.
  const config = [
    ['^/api/v1/agents/\\{id\\}', 'path.id', seeded.agent],
    ['^/api/v1/kb/folders/\\{id\\}', 'path.id', seeded.folder],
    ['^/api/v1/customers/\\{id\\}', 'path.id', seeded.customer],
    ['^/api/v1/conversations/\\{id\\}', 'path.id', seeded.conversation],
    ['^/api/(public/widget/(history|tasks)|chat/connect)$', 'query.conversation_id', seeded.conversation],
  ]
    .map(([path, name, value]) => `[[operations]]\ninclude-path-regex = '${path}'\nparameters = { "${name}" = "${value}" }\n`)
    .join('\n');
  fs.writeFileSync(path.join(reportDir, 'schemathesis.toml'), config);
  const args = [
    '--config-file',
    path.join(reportDir, 'schemathesis.toml'),
    'run',
    `${base}/api/v1/openapi.json`,
    '--url',
    base,
    '--checks',
    CHECKS,
    // The built-in form would fail every refusal the document states (see CHECKS); ours runs instead.
    ...(CHECKS.split(',').includes('all') ? ['--exclude-checks', 'positive_data_acceptance'] : []),
    '--seed',
    String(SEED),
    '--max-examples',
    String(MAX_EXAMPLES),
    '--phases',
    PHASES,
    ...(EXCLUDE_PATHS ? ['--exclude-path-regex', EXCLUDE_PATHS] : []),
    '--workers',
    '1',
    '--no-shrink',
    // Hypothesis's example database lives in the fresh report directory and is never read again: not written either.
    '--generation-database',
    'none',
    '--request-timeout',
    '30',
    '--suppress-health-check',
    'all',
    '--continue-on-failure',
    '--header',
    `Authorization: Bearer ${key}`,
    '--header',
    `X-Concierge-Site: ${siteId}`,
    '--header',
    `Origin: ${ORIGIN}`,
    '--report-dir',
    reportDir,
  ];
  // A 501 not_implemented the document declares (a credential kind whose listing is not built) is an answer, not a fault.
  const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json() as { paths: Record<string, Record<string, { operationId?: string; responses?: object }>> };
  const declares501 = Object.values(doc.paths).flatMap((item) => Object.values(item).filter((op) => op.responses && '501' in op.responses).map((op) => op.operationId!));
  if (declares501.length) {
    fs.appendFileSync(path.join(reportDir, 'schemathesis.toml'), declares501.map((id) => `\n[[operations]]\ninclude-operation-id = '${id}'\nchecks.not_a_server_error.expected-statuses = ['2xx', '3xx', '4xx', '501']\n`).join(''));
  }
  const { code, out } = await run(st, args, MAX_SECONDS * 1000, reportDir);
  fs.writeFileSync(path.join(reportDir, 'output.txt'), out);
  if (code !== 0) throw new Error(`schemathesis exited with ${code ?? `a kill after ${MAX_SECONDS} s`} (full output: ${reportDir}/output.txt):\n${out.slice(-20_000)}`);
  // The summary names no failure and every selected operation was tested.
  expect(out).not.toMatch(/failures?,|ST\d{3}/);
  expect(out).toMatch(/Tested: \d+/);
}, (MAX_SECONDS + 60) * 1000);
