// What this measures and how to read it: docs/benchmarks.md#msgapp-send
import { randomBytes } from 'node:crypto';
import { CloudApiProvider } from '../providers/msgapp/cloud-api';
import { startMsgappSandbox } from '../dev/fake-msgapp';
import { section, type Cleanup } from './lib/child';
import { envInt, loadSettings } from './lib/load';
import { benchApi, benchStack, benchTemporal, benchWorker, setUpBench } from './lib/setup';
import { compareTargets, inLanes, now, percentile, runStats, summarizeTarget } from './lib/stats';
import type { Result, RunStats } from './lib/types';
import { publishAgent } from './lib/widget';

const TARGET_RATIO = 0;
const NUMBER = '+15550001111';
const PHONE_NUMBER_ID = '1055';
const ACCESS_TOKEN = 'token';

const settings = () => ({
  sends: envInt('BENCH_MSGAPP_SENDS', 300, 1), concurrency: envInt('BENCH_MSGAPP_CONCURRENCY', 10, 1), warmupSends: envInt('BENCH_MSGAPP_WARMUP_SENDS', 30, 0), rounds: loadSettings().rounds,
  oneProcess: process.env.BENCH_MSGAPP_ONE_PROCESS === '1',
});

/** `n` calls of `one(i)` with `concurrency` in flight; every call must resolve. */
async function batch(n: number, concurrency: number, one: (i: number) => Promise<void>): Promise<{ seconds: number; sendsPerSec: number; latenciesMs: number[] }> {
  const latenciesMs: number[] = [];
  const started = now();
  await inLanes(n, concurrency, async (i) => {
    const t0 = now();
    await one(i);
    latenciesMs.push(now() - t0);
  });
  const seconds = (now() - started) / 1000;
  return { seconds, sendsPerSec: n / seconds, latenciesMs };
}

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = settings();
  const bench = await setUpBench(cleanup);
  // The provider's side: the sandbox on loopback (status callbacks dropped: no webhook URL).
  const sandbox = await startMsgappSandbox({ appSecret: 'app-secret', accessToken: ACCESS_TOKEN });
  cleanup.push(['msgapp sandbox', () => sandbox.close()]);
  const provider = new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 10_000 });
  const overrides = { services: { msgapp: provider } };
  // One process: one composition (role both) as `npm start` (its client on the worker's native connection: eager starts).
  const { dev, api } = s.oneProcess ? await benchStack(bench, { oneProcess: true, overrides }) : await (async () => {
    const dev = await benchTemporal(bench);
    await benchWorker(bench, dev, { overrides });
    return { dev, api: await benchApi(bench, { overrides, temporalAddress: dev.address }) };
  })();
  const apiUrl = api.url;
  const apiServices = api.c.services;
  const credentialId = (await apiServices.credentials.create(bench.workspaceId, 'msgapp_access_token', 'n', ACCESS_TOKEN)).id;
  const triggers = { msgapp: { number: NUMBER, phone_number_id: PHONE_NUMBER_ID, credential_id: credentialId } };
  const templates = [{ name: 'hello', body: 'Hello', status: 'approved' }];
  const { agentId, key } = await publishAgent(api, bench.workspaceId, { name: 'Bench sender', instructions: 'x', triggers, actions: [{ type: 'sender' }], templates }, ['conversations:write']);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  log(`  setup: API ${apiUrl}, msgapp sandbox ${sandbox.url}, Temporal dev server ${dev.address} (SQLite file), ${s.oneProcess ? 'one composition (role both, as npm start: eager starts)' : 'a worker and an API apart'}, agent ${agentId}`);

  // ---- The two sides. Recipients cycle through +1555777NNNN.
  let seq = 0;
  const recipient = () => `+1555777${String(seq++ % 10_000).padStart(4, '0')}`;
  const viaWorkflow = async () => {
    const res = await fetch(`${apiUrl}/api/v1/messages`, { method: 'POST', headers, body: JSON.stringify({ agent_id: agentId, to: recipient(), template: { name: 'hello' } }) });
    const text = await res.text();
    if (res.status !== 201) throw new Error(`POST /api/v1/messages answered ${res.status}: ${text}`);
  };
  const direct = async () => {
    const clientMessageId = `msg_bench${randomBytes(8).toString('hex')}`;
    const r = await provider.send({ phoneNumberId: PHONE_NUMBER_ID, accessToken: ACCESS_TOKEN, to: recipient(), content: { kind: 'template', name: 'hello', language: 'en' }, clientMessageId });
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
  const sides = { workflow: viaWorkflow, direct } as const;
  for (let round = 1; round <= s.rounds; round++) {
    const order: Array<keyof typeof sides> = round % 2 === 1 ? ['workflow', 'direct'] : ['direct', 'workflow'];
    const line: string[] = [];
    for (const side of order) {
      const sentBefore = sandbox.sent.length;
      const b = await batch(s.sends, s.concurrency, sides[side]);
      const arrived = sandbox.sent.length - sentBefore;
      if (arrived !== s.sends) throw new Error(`${side} round ${round}: the sandbox received ${arrived} sends, expected ${s.sends}`);
      runs.push(runStats(side, round, b.seconds, s.sends, b.latenciesMs, s.concurrency, { [side === 'workflow' ? '201' : 'ok']: s.sends }));
      line.push(`${side} ${b.sendsPerSec.toFixed(1)} sends/s (p50 ${percentile(b.latenciesMs, 50).toFixed(1)} ms, p99 ${percentile(b.latenciesMs, 99).toFixed(1)} ms)`);
    }
    log(`  round ${round}: ${line.join('; ')}`);
  }

  const wf = summarizeTarget(runs, 'workflow');
  const dr = summarizeTarget(runs, 'direct');
  const comparison = compareTargets(runs, 'msgapp-send', 'workflow', 'direct', TARGET_RATIO, 'sends/s');
  const ratio = comparison.ratio;
  const headline =
    `msgapp-send: ${wf.meanRequestsPerSec.toFixed(0)} sends/s (p50 ${wf.meanLatencyP50Ms.toFixed(0)} ms, p99 ${wf.meanLatencyP99Ms.toFixed(0)} ms) / ` +
    `direct ${dr.meanRequestsPerSec.toFixed(0)} sends/s (p50 ${dr.meanLatencyP50Ms.toFixed(1)} ms, p99 ${dr.meanLatencyP99Ms.toFixed(1)} ms) = ratio ${ratio.toFixed(2)}`;

  return {
    section: 'msgapp-send',
    description: `${s.sends} template sends per side per round, ${s.concurrency} in flight: POST /api/v1/messages (→ messageSendWorkflow) vs CloudApiProvider.send directly`,
    settings: { ...s, temporal: 'temporal server start-dev, SQLite file', order: 'per round workflow / direct alternating; mean over rounds' },
    runs,
    targets: [wf, dr],
    comparisons: [comparison],
    headlines: [headline],
  };
}

export const benchMsgappSend = section(module, 'msgapp-send', measure);
