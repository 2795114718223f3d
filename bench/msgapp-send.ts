// The msgapp-send section: template sends through the real workflow path (POST
// /api/v1/messages on the API listening on 127.0.0.1 → MessageService.plan →
// messageSendWorkflow on a Temporal dev server → the send activity's CloudApiProvider.send)
// against CloudApiProvider.send called directly, both to the same msgapp sandbox in the
// same run. Runs in a child process of its own (bench/lib/child.ts).
//
// Each side sends N template messages (templates need no open 24-hour window) with C in
// flight; throughput is N / wall time, latency is per send. A 201 (or a provider message
// id, directly) is the only accepted outcome: anything else fails the section. Before the
// measured rounds each side gets an unmeasured warm-up burst. BENCH_ROUNDS rounds, the
// order of the two sides alternating; the ratio is mean workflow sends/s / mean direct sends/s.
// It is informational (no goal yet: target 0).
//
// Settings (besides BENCH_ROUNDS, BENCH_PG_URL from bench/lib):
//   BENCH_MSGAPP_SENDS (300)           sends per side per measured round
//   BENCH_MSGAPP_CONCURRENCY (10)      sends in flight, on both sides
//   BENCH_MSGAPP_WARMUP_SENDS (30)     unmeasured sends per side before the rounds
//   TEMPORAL_CLI_PATH                  the `temporal` CLI (else found, or pip-installed, as npm start does)
import { connectTemporal, runWorker } from './lib/temporal';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DefaultLogger, makeTelemetryFilterString, Runtime } from '@temporalio/worker';
import pino from 'pino';
import { buildApp } from '../api/app';
import { KeyCache } from '../core/auth/key-cache';
import { SecretBox } from '../core/crypto/secret-box';
import { openDatabase } from '../core/db/orm';
import { IndexingService } from '../core/kb/indexing';
import { CloudApiProvider } from '../core/msgapp/provider';
import { policyFromCidrs } from '../core/net/ssrf';
import { createRequestLimits } from '../core/ratelimit';
import { createServices, type ServiceOptions } from '../core/services';
import { findTemporalCli, startDevServer } from '../infra/temporal';
import { startMsgappSandbox } from '../sandbox/msgapp';
import { createWorker } from '../worker/worker';
import { childMain, runInChild, type Cleanup } from './lib/child';
import { cpuBetween, cpuSnapshot, formatCpu, type CpuUse } from './lib/cpu';
import { createBenchDatabase, createKey, createWorkspace } from './lib/db';
import { envNumber, listen, loadSettings } from './lib/load';
import { unusedKbOptions } from './lib/services';
import { mean, percentile, round1, summarizeTarget } from './lib/stats';
import type { Comparison, Result, RunStats, TargetSummary } from './lib/types';

const TARGET_RATIO = 0;
const TASK_QUEUE = 'bench-msgapp-send';
const NAMESPACE = 'default';
const NUMBER = '+15550001111';
const PHONE_NUMBER_ID = '1055';
const ACCESS_TOKEN = 'token';

const now = () => performance.now();

function settings() {
  return {
    sends: Math.round(envNumber('BENCH_MSGAPP_SENDS', 300, 1)),
    concurrency: Math.round(envNumber('BENCH_MSGAPP_CONCURRENCY', 10, 1)),
    warmupSends: Math.round(envNumber('BENCH_MSGAPP_WARMUP_SENDS', 30, 0)),
    rounds: loadSettings().rounds,
  };
}

interface Batch {
  seconds: number;
  sendsPerSec: number;
  latenciesMs: number[];
}

/** `n` calls of `one(i)` with `concurrency` in flight; every call must resolve. */
async function batch(n: number, concurrency: number, one: (i: number) => Promise<void>): Promise<Batch> {
  const latenciesMs: number[] = [];
  let next = 0;
  const started = now();
  const lane = async () => {
    for (let i = next++; i < n; i = next++) {
      const t0 = now();
      await one(i);
      latenciesMs.push(now() - t0);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, lane));
  const seconds = (now() - started) / 1000;
  return { seconds, sendsPerSec: n / seconds, latenciesMs };
}

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = settings();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-bench-msgapp-'));
  cleanup.push(['temp dir', async () => fs.rmSync(tmp, { recursive: true, force: true })]);
  const quiet = pino({ level: 'silent' });

  // ---- The provider's side: the sandbox on loopback (status callbacks dropped: no webhook URL).
  const sandbox = await startMsgappSandbox({ appSecret: 'app-secret', accessToken: ACCESS_TOKEN });
  cleanup.push(['msgapp sandbox', () => sandbox.close()]);
  const provider = new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 10_000 });

  // ---- Database: the API's pool and the worker's own pool.
  const db = await createBenchDatabase();
  cleanup.push(['database', () => db.drop()]);
  const workerOrm = await openDatabase(db.url);
  cleanup.push(['worker orm', () => workerOrm.close(true)]);
  const workspaceId = await createWorkspace(db.orm);
  const kb = unusedKbOptions(tmp);
  const options: ServiceOptions = {
    idempotencyTtlHours: 24,
    box: new SecretBox(randomBytes(32)),
    sender: { policy: policyFromCidrs(''), timeoutMs: 10_000 },
    ...kb.options,
    msgapp: provider,
  };

  // ---- Temporal: a dev server (SQLite file) and one worker.
  Runtime.install({ logger: new DefaultLogger('WARN'), telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }) } } });
  const cli = findTemporalCli({ explicit: process.env.TEMPORAL_CLI_PATH, install: true });
  const dev = await startDevServer({ cli, dbFile: path.join(tmp, 'temporal.db'), port: 0, uiPort: 0, namespace: NAMESPACE, logFile: path.join(tmp, 'temporal.log') });
  cleanup.push(['temporal dev server', () => dev.stop()]);
  const { nativeConnection, client } = await connectTemporal(dev.address, NAMESPACE, cleanup);
  const workerServices = createServices(workerOrm.em, options);
  // The worker registers the indexing activities too; nothing here makes them run.
  const indexing = new IndexingService({ em: workerOrm.em, blobs: kb.options.blobs, extract: kb.extract, embedder: kb.options.embedder });
  const worker = await createWorker({ connection: nativeConnection, namespace: NAMESPACE, taskQueue: TASK_QUEUE, deps: { em: workerOrm.em, services: workerServices, indexing } });
  void runWorker(worker, cleanup);

  // ---- The API, as one API process builds it, with the Temporal client.
  const keyCache = new KeyCache(db.url, quiet);
  await keyCache.start();
  cleanup.push(['key cache', () => keyCache.stop()]);
  const apiServices = createServices(db.orm.em, { ...options, keyCache });
  const app = await buildApp({
    services: apiServices,
    limits: await createRequestLimits({ kind: 'memory' }, 1e9, 1e9),
    bodyLimitBytes: 1024 * 1024,
    temporal: { client, taskQueue: TASK_QUEUE },
  });
  cleanup.push(['api', () => app.close()]);
  const apiUrl = await listen(app);
  const key = await createKey(apiServices, workspaceId, ['conversations:write', 'workflows:write', 'workflows:publish']);
  const headers = { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' };
  const credentialId = (await apiServices.credentials.create(workspaceId, 'msgapp_access_token', 'n', ACCESS_TOKEN)).id;

  const created = await fetch(`${apiUrl}/api/v1/agents`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      name: 'Bench sender',
      instructions: 'x',
      triggers: { msgapp: { number: NUMBER, phone_number_id: PHONE_NUMBER_ID, credential_id: credentialId } },
      actions: [{ type: 'sender' }],
      templates: [{ name: 'hello', body: 'Hello', status: 'approved' }],
    }),
  });
  const agent = (await created.json()) as { id?: string };
  if (created.status !== 201 || !agent.id) throw new Error(`POST /api/v1/agents answered ${created.status}: ${JSON.stringify(agent)}`);
  const agentId = agent.id;
  const published = await fetch(`${apiUrl}/api/v1/agents/${agentId}/publish`, { method: 'POST', headers: { authorization: headers.authorization } });
  if (published.status >= 300) throw new Error(`publish answered ${published.status}: ${await published.text()}`);
  log(`  setup: API ${apiUrl}, msgapp sandbox ${sandbox.url}, Temporal dev server ${dev.address} (SQLite file), one worker on '${TASK_QUEUE}', agent ${agentId}`);

  // ---- The two sides. Recipients cycle through +1555777NNNN.
  let seq = 0;
  const recipient = () => `+1555777${String(seq++ % 10_000).padStart(4, '0')}`;
  const viaWorkflow = async () => {
    const res = await fetch(`${apiUrl}/api/v1/messages`, { method: 'POST', headers, body: JSON.stringify({ agent_id: agentId, to: recipient(), template: { name: 'hello' } }) });
    const text = await res.text();
    if (res.status !== 201) throw new Error(`POST /api/v1/messages answered ${res.status}: ${text}`);
  };
  const direct = async () => {
    const r = await provider.send({
      phoneNumberId: PHONE_NUMBER_ID,
      accessToken: ACCESS_TOKEN,
      to: recipient(),
      content: { kind: 'template', name: 'hello', language: 'en' },
      clientMessageId: `msg_bench${randomBytes(8).toString('hex')}`,
    });
    if (!r.providerMessageId) throw new Error('direct send returned no provider message id');
  };

  // ---- Warm-up: both paths (first workflow tasks, connections, JIT).
  if (s.warmupSends > 0) {
    const t0 = now();
    await batch(s.warmupSends, s.concurrency, viaWorkflow);
    await batch(s.warmupSends, s.concurrency, direct);
    log(`  warm-up: ${s.warmupSends} sends per side in ${((now() - t0) / 1000).toFixed(2)} s`);
  }

  // ---- Measured rounds, alternating which side goes first.
  const runs: RunStats[] = [];
  const cpu: Record<string, CpuUse[]> = { workflow: [], direct: [] };
  const cpuSources = { pids: { temporal: dev.process.pid }, names: { postgres: 'postgres' } };
  const sides = { workflow: viaWorkflow, direct } as const;
  for (let round = 1; round <= s.rounds; round++) {
    const order: Array<keyof typeof sides> = round % 2 === 1 ? ['workflow', 'direct'] : ['direct', 'workflow'];
    const line: string[] = [];
    for (const side of order) {
      const sentBefore = sandbox.sent.length;
      const c0 = cpuSnapshot(cpuSources);
      const b = await batch(s.sends, s.concurrency, sides[side]);
      cpu[side].push(cpuBetween(c0, cpuSnapshot(cpuSources), os.cpus().length));
      const arrived = sandbox.sent.length - sentBefore;
      if (arrived !== s.sends) throw new Error(`${side} round ${round}: the sandbox received ${arrived} sends, expected ${s.sends}`);
      runs.push({
        target: side,
        round,
        durationSeconds: b.seconds,
        connections: s.concurrency,
        requestsPerSec: b.sendsPerSec,
        latencyP50Ms: percentile(b.latenciesMs, 50),
        latencyP99Ms: percentile(b.latenciesMs, 99),
        latencyMeanMs: mean(b.latenciesMs),
        totalRequests: s.sends,
        statusCodes: { [side === 'workflow' ? '201' : 'ok']: s.sends },
      });
      line.push(`${side} ${b.sendsPerSec.toFixed(1)} sends/s (p50 ${percentile(b.latenciesMs, 50).toFixed(1)} ms, p99 ${percentile(b.latenciesMs, 99).toFixed(1)} ms)`);
    }
    log(`  round ${round}: ${line.join('; ')}`);
  }
  for (const side of ['workflow', 'direct'] as const) log(`  ${side}: ${formatCpu(cpu[side][cpu[side].length - 1])}`);

  const summary = (target: string): TargetSummary => summarizeTarget(runs, target);
  const wf = summary('workflow');
  const dr = summary('direct');
  const ratio = wf.meanRequestsPerSec / dr.meanRequestsPerSec;
  const roundRatios = Array.from({ length: s.rounds }, (_, i) => {
    const w = runs.find((r) => r.target === 'workflow' && r.round === i + 1)!;
    const d = runs.find((r) => r.target === 'direct' && r.round === i + 1)!;
    return w.requestsPerSec / d.requestsPerSec;
  });
  const comparison: Comparison = {
    name: 'msgapp-send',
    subject: 'workflow path',
    baseline: 'direct',
    subjectRequestsPerSec: wf.meanRequestsPerSec,
    baselineRequestsPerSec: dr.meanRequestsPerSec,
    ratio,
    roundRatios,
    bestRatio: wf.bestRequestsPerSec / dr.bestRequestsPerSec,
    target: TARGET_RATIO,
    pass: ratio >= TARGET_RATIO,
    subjectUnit: 'sends/s',
    baselineUnit: 'sends/s',
  };
  const headline =
    `msgapp-send: ${wf.meanRequestsPerSec.toFixed(0)} sends/s (p50 ${wf.meanLatencyP50Ms.toFixed(0)} ms, p99 ${wf.meanLatencyP99Ms.toFixed(0)} ms) / ` +
    `direct ${dr.meanRequestsPerSec.toFixed(0)} sends/s (p50 ${dr.meanLatencyP50Ms.toFixed(1)} ms, p99 ${dr.meanLatencyP99Ms.toFixed(1)} ms) = ratio ${ratio.toFixed(2)}`;
  log(`  ${headline}`);

  return {
    section: 'msgapp-send',
    description:
      `${s.sends} template sends per side per round, ${s.concurrency} in flight: POST /api/v1/messages (HTTP on loopback → messageSendWorkflow on a Temporal dev server → ` +
      'CloudApiProvider.send) vs CloudApiProvider.send directly, both to the msgapp sandbox',
    settings: { ...s, temporal: 'temporal server start-dev, SQLite file', order: 'per round workflow / direct alternating; mean over rounds' },
    runs,
    targets: [wf, dr],
    comparisons: [comparison],
    headlines: [headline],
    details: {
      cpu,
      latencyMs: Object.fromEntries(runs.map((r) => [`${r.target}-round${r.round}`, { p50: round1(r.latencyP50Ms), p99: round1(r.latencyP99Ms), mean: round1(r.latencyMeanMs) }])),
    },
  };
}

export function benchMsgappSend(log: (line: string) => void = console.log): Promise<Result> {
  return runInChild(__filename, 'msgapp-send', log);
}

if (require.main === module) childMain(measure);
