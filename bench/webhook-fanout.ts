// The webhook-fanout section: N events fanned out through the real pipeline (emitEvent's
// outbox + NOTIFY -> outbox relay -> one webhookDeliveryWorkflow per delivery -> the
// attempt activity's signed HTTPS POST) to a local HTTPS receiver, against plain signed
// HTTPS POSTs from Node to the same receiver in the same run. Order: warm-up, probes
// (single events on an idle pipeline), then plain(1) webhook(1) plain(2) ... plain(R+1):
// each webhook round's ratio is against the mean of the plain runs around it. Runs in a
// child process (bench/lib/child.ts). The pipeline's code is timed from outside by wrapping
// the worker's DeliveryService methods and its Temporal client's workflow.start.
//
// Settings (besides BENCH_ROUNDS, BENCH_CONNECTIONS):
//   BENCH_WEBHOOK_EVENTS (500)           events per measured round (one subscription: one delivery each)
//   BENCH_WEBHOOK_WARMUP_EVENTS (20)     unmeasured warm-up burst (and as many warm-up plain POSTs)
//   BENCH_WEBHOOK_PROBES (10)            events sent one at a time on an idle pipeline (unloaded latency)
//   BENCH_WEBHOOK_TIMEOUT_SECONDS (300)  limit for one phase's deliveries to arrive (and settle)
//   BENCH_WEBHOOK_HISTORY_SAMPLE (25)    workflow histories read per round for the Temporal stage breakdown
//   BENCH_WEBHOOK_TLS (extra-ca)         how the sender trusts the receiver's test CA: `extra-ca`
//                                        (NODE_EXTRA_CA_CERTS, as in production) or `ca-option` (the
//                                        sender's `ca` setting, as the tests do: a new SecureContext of
//                                        ~145 PEMs per connection, ~21 ms of CPU per delivery)
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { temporal } from '@temporalio/proto';
import { policyFromCidrs } from '../core/net/ssrf';
import { emitEvent } from '../core/webhooks/emitter';
import { USER_AGENT } from '../core/webhooks/sender';
import { signatureHeader, verifyWebhook } from '../core/webhooks/signature';
import { createTestPki, type TestPki } from '../test/support/tls';
import { deliveryWorkflowId } from '../worker/outbox-sources';
import { childMain, runInChild, type Cleanup } from './lib/child';
import { cpuBetween, cpuSnapshot, formatCpu, type CpuSnapshot, type CpuUse } from './lib/cpu';
import { envNumber, loadSettings } from './lib/load';
import { benchCompose, benchTemporal, benchWorker, setUpBench } from './lib/setup';
import { mean, round1, runStats, spread, summarizeTarget, type Spread } from './lib/stats';
import type { Comparison, Result, RunStats } from './lib/types';

const PKI_FILE_ENV = 'BENCH_WEBHOOK_PKI_FILE';
const TARGET_RATIO = 0.5;
const now = () => performance.now();
const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '-');

function loadWebhookSettings() {
  const base = loadSettings();
  return {
    events: Math.round(envNumber('BENCH_WEBHOOK_EVENTS', 500, 1)),
    warmupEvents: Math.round(envNumber('BENCH_WEBHOOK_WARMUP_EVENTS', 20, 0)),
    probes: Math.round(envNumber('BENCH_WEBHOOK_PROBES', 10, 0)),
    timeoutSeconds: envNumber('BENCH_WEBHOOK_TIMEOUT_SECONDS', 300, 1),
    historySample: Math.round(envNumber('BENCH_WEBHOOK_HISTORY_SAMPLE', 25, 0)),
    rounds: base.rounds,
    /** In-flight plain POSTs, and concurrent emitting transactions on the webhook side. */
    concurrency: base.connections,
    tls: process.env.BENCH_WEBHOOK_TLS === 'ca-option' ? ('ca-option' as const) : ('extra-ca' as const),
  };
}

/** A message.inbound payload of a realistic size (the envelope is ~400 bytes). */
const eventData = (i: number) => ({
  message_id: `msg_bench_${i}`,
  conversation_id: 'conv_bench',
  channel: 'msgapp',
  from: '+15550100100',
  text: 'Hello! I ordered a blue jacket last week and would like to know whether it has shipped yet, and when it should arrive. Thanks.',
});

/** Per delivery: when each stage happened (performance.now() ms). */
type Stage = 'emit' | 'picked' | 'startCall' | 'started' | 'attemptStart' | 'recv' | 'attemptEnd' | 'outcomeStart' | 'outcomeEnd';

/** The in-process stage intervals reported for every delivery: [label, from, to]. */
const STAGES: Array<[string, Stage, Stage]> = [
  ['emit commit -> dispatcher read it', 'emit', 'picked'],
  ['dispatcher read -> start RPC sent', 'picked', 'startCall'],
  ['start RPC (StartWorkflowExecution)', 'startCall', 'started'],
  ['workflow started -> attempt activity running', 'started', 'attemptStart'],
  ['attempt running -> receipt (select, sign, TLS connect, POST)', 'attemptStart', 'recv'],
  ['receipt -> attempt done (response, 2 writes)', 'recv', 'attemptEnd'],
  ['attempt done -> recordOutcome running', 'attemptEnd', 'outcomeStart'],
  ['recordOutcome', 'outcomeStart', 'outcomeEnd'],
];

/** Event-loop delay of this process over a phase (p50 / p99 / max, ms). */
function loopDelay() {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  return () => {
    h.disable();
    return { p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6 };
  };
}
type LoopDelay = ReturnType<ReturnType<typeof loopDelay>>;
const fmtLoop = (d: LoopDelay) => `event-loop delay p50 ${d.p50.toFixed(1)} / p99 ${d.p99.toFixed(1)} / max ${d.max.toFixed(0)} ms`;

interface PlainPhase {
  stats: RunStats;
  latencies: number[];
  cpu: CpuUse;
  loop: LoopDelay;
}

interface WebhookPhase {
  stats: RunStats;
  ids: string[];
  cpu: CpuUse;
  cpuTail: CpuUse;
  /** Seconds from the first emit commit until the last of each stage. */
  timeline: Record<string, number>;
  inflight: { mean: number; max: number };
  settledSeconds: number;
  loop: LoopDelay;
}

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = loadWebhookSettings();
  const pki = JSON.parse(fs.readFileSync(process.env[PKI_FILE_ENV]!, 'utf8')) as TestPki;

  // ---- Stage marks, filled by the receiver and by the wrappers below.
  const marks = new Map<string, Partial<Record<Stage, number>>>();
  const mark = (id: string, stage: Stage, t = now()) => {
    let m = marks.get(id);
    if (!m) marks.set(id, (m = {}));
    if (m[stage] === undefined) m[stage] = t;
  };
  const attemptProblems: string[] = [];
  let duplicates = 0;
  // Attempts in flight, integrated over time (for the mean concurrency the webhook side reached).
  let inflight = 0;
  let inflightMax = 0;
  let inflightArea = 0;
  let inflightAt = now();
  const inflightStep = (d: number) => {
    const t = now();
    inflightArea += inflight * (t - inflightAt);
    inflightAt = t;
    inflight += d;
    inflightMax = Math.max(inflightMax, inflight);
  };

  // ---- The receiver: HTTPS with the test certificate, 200 at once, receipt time per X-Concierge-Delivery.
  const received = new Map<string, { at: number; body: Buffer; signature: string }>();
  const plainReceived = new Map<string, number>();
  const server = https.createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = now();
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      const id = String(req.headers['x-concierge-delivery'] ?? '');
      if (id.startsWith('dlv_')) {
        if (received.has(id)) duplicates++;
        else received.set(id, { at, body: Buffer.concat(chunks), signature: String(req.headers['x-concierge-signature'] ?? '') });
        mark(id, 'recv', at);
      } else {
        plainReceived.set(id, at);
      }
    });
  });
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  cleanup.push([
    'receiver',
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  ]);
  const port = (server.address() as { port: number }).port;
  const hookUrl = `https://127.0.0.1:${port}/hook`;

  // ---- The "API" process emitting events, and a worker process (relay, workflows, activities) instrumented from outside.
  const bench = await setUpBench(cleanup);
  const { workspaceId } = bench;
  const emitter = await benchCompose(bench, 'cli');
  const subscription = await emitter.services.subscriptions.create(workspaceId, hookUrl, ['message.inbound']);
  const dispatchBatches: number[] = [];
  const dev = await benchTemporal(bench);
  const sender = { policy: policyFromCidrs('127.0.0.0/8'), timeoutMs: 10_000, ...(s.tls === 'ca-option' ? { ca: pki.ca } : {}) };
  const worker = await benchWorker(bench, dev, { overrides: { services: { sender } } }, (c) => {
    const deliveries = c.services.deliveries;
    const undispatched = deliveries.undispatched.bind(deliveries);
    deliveries.undispatched = async (limit) => {
      const rows = await undispatched(limit);
      const t = now();
      for (const r of rows) mark(r.id, 'picked', t);
      if (rows.length) dispatchBatches.push(rows.length);
      return rows;
    };
    const attempt = deliveries.attempt.bind(deliveries);
    deliveries.attempt = async (id, run, n) => {
      mark(id, 'attemptStart');
      inflightStep(+1);
      try {
        const r = await attempt(id, run, n);
        if (r.outcome !== 'delivered') attemptProblems.push(`${id} attempt ${n}: ${r.outcome} ${r.error ?? ''}`.trim());
        return r;
      } finally {
        inflightStep(-1);
        mark(id, 'attemptEnd');
      }
    };
    const recordOutcome = deliveries.recordOutcome.bind(deliveries);
    deliveries.recordOutcome = async (id, run, delivered, error) => {
      mark(id, 'outcomeStart');
      try {
        return await recordOutcome(id, run, delivered, error);
      } finally {
        mark(id, 'outcomeEnd');
      }
    };
    const wf = c.temporal!.client.workflow;
    const start = wf.start.bind(wf);
    wf.start = (async (type: Parameters<typeof start>[0], opts: Parameters<typeof start>[1]) => {
      const id = (opts.args?.[0] as { deliveryId?: string } | undefined)?.deliveryId;
      if (id) mark(id, 'startCall');
      const handle = await start(type, opts);
      if (id) mark(id, 'started');
      return handle;
    }) as typeof wf.start;
  });
  const client = worker.temporal!.client;
  log(`  setup: Temporal dev server ${dev.address} (SQLite file), one worker with the outbox relay, HTTPS receiver ${hookUrl}; TLS trust: ${s.tls}`);

  const cpuSources = { pids: { temporal: dev.process.pid }, names: { postgres: 'postgres' } };
  const snap = (): CpuSnapshot => cpuSnapshot(cpuSources);
  const cpus = os.cpus().length;

  async function waitUntil(cond: () => boolean, timeoutMs: number, what: () => string): Promise<void> {
    const deadline = now() + timeoutMs;
    while (!cond()) {
      if (now() > deadline) throw new Error(`timed out after ${(timeoutMs / 1000).toFixed(0)} s: ${what()}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  const count = (ids: string[], stage: Stage) => ids.filter((id) => marks.get(id)?.[stage] !== undefined).length;
  const progress = (ids: string[]) =>
    `of ${ids.length} deliveries: dispatcher read ${count(ids, 'picked')}, workflows started ${count(ids, 'started')}, ` +
    `attempts started ${count(ids, 'attemptStart')}, received ${count(ids, 'recv')}, attempts done ${count(ids, 'attemptEnd')}, ` +
    `outcomes recorded ${count(ids, 'outcomeEnd')}; attempt problems: ${attemptProblems.slice(0, 5).join('; ') || 'none'}`;

  /** Every delivery recorded as delivered and no delivery workflow still running. */
  async function settle(ids: string[]): Promise<void> {
    await waitUntil(() => count(ids, 'outcomeEnd') === ids.length, s.timeoutSeconds * 1000, () => `waiting for outcomes; ${progress(ids)}`);
    const deadline = now() + s.timeoutSeconds * 1000;
    for (;;) {
      const { count: open } = await client.workflow.count(`WorkflowType = "webhookDeliveryWorkflow" AND ExecutionStatus = "Running"`);
      if (open === 0) break;
      if (now() > deadline) throw new Error(`${open} delivery workflows still running ${s.timeoutSeconds} s after their outcomes were recorded`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const [{ pending }] = await bench.db.orm.em.fork().execute<{ pending: string }[]>(
      `select count(*) as pending from webhook_deliveries where status <> 'delivered' and id in (${ids.map(() => '?').join(',')})`,
      ids,
    );
    if (Number(pending) !== 0) throw new Error(`${pending} deliveries not marked delivered after settling`);
  }

  // ---- The webhook side: N events, each its own transaction, `concurrency` at a time.
  async function webhookRun(round: number, n: number, concurrency: number): Promise<WebhookPhase> {
    const ids: string[] = [];
    const cpu0 = snap();
    const stopLoop = loopDelay();
    const area0 = inflightArea;
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(concurrency, n) }, async () => {
        while (next < n) {
          const i = next++;
          const { deliveryIds } = await emitter.em.fork().transactional((tx) => emitEvent(tx, workspaceId, 'message.inbound', eventData(i)));
          const t = now();
          if (deliveryIds.length !== 1) throw new Error(`event ${i} made ${deliveryIds.length} deliveries, expected 1 (one subscription)`);
          mark(deliveryIds[0], 'emit', t);
          ids.push(deliveryIds[0]);
        }
      }),
    );
    const what = round === 0 ? 'warm-up' : `round ${round}`;
    await waitUntil(() => count(ids, 'recv') === ids.length, s.timeoutSeconds * 1000, () => `webhook ${what}: not every delivery arrived; ${progress(ids)}`);
    const cpu1 = snap();
    const loop = stopLoop();
    inflightStep(0);
    const area1 = inflightArea;
    await settle(ids);
    const cpu2 = snap();
    if (attemptProblems.length) throw new Error(`webhook ${what}: attempts that did not deliver: ${attemptProblems.slice(0, 5).join('; ')}`);

    const at = (id: string, st: Stage) => marks.get(id)![st]!;
    const firstEmit = Math.min(...ids.map((id) => at(id, 'emit')));
    const lastRecv = Math.max(...ids.map((id) => at(id, 'recv')));
    const latencies = ids.map((id) => at(id, 'recv') - at(id, 'emit'));
    const seconds = (lastRecv - firstEmit) / 1000;
    const lastOf = (st: Stage) => round1((Math.max(...ids.map((id) => at(id, st))) - firstEmit) / 10) / 100;
    const timeline: Record<string, number> = {};
    for (const st of ['emit', 'picked', 'started', 'attemptStart', 'recv', 'attemptEnd', 'outcomeEnd'] as Stage[]) timeline[st] = lastOf(st);
    return {
      ids,
      stats: runStats('webhook', round, seconds, n, latencies, concurrency, { '200': n }),
      cpu: cpuBetween(cpu0, cpu1, cpus),
      cpuTail: cpuBetween(cpu1, cpu2, cpus),
      timeline,
      inflight: { mean: (area1 - area0) / (cpu1.at - cpu0.at), max: inflightMax },
      settledSeconds: (cpu2.at - firstEmit) / 1000,
      loop,
    };
  }

  // ---- The baseline: the same receiver, a similar signed body, straight from Node.
  const secret = subscription.secret;
  async function plainRun(target: 'plain' | 'plain-keepalive', round: number, n: number, concurrency: number): Promise<PlainPhase> {
    const ca = s.tls === 'ca-option' ? pki.ca : undefined;
    // `plain`: a fresh connection (TLS handshake) per POST, as the sender makes (agent: false).
    const agent = target === 'plain' ? false : new https.Agent({ keepAlive: true, maxSockets: concurrency, ca });
    const tag = `${target}_${round}_${randomBytes(3).toString('hex')}`;
    const starts = new Map<string, number>();
    const cpu0 = snap();
    const stopLoop = loopDelay();
    const post = (i: number) =>
      new Promise<void>((resolve, reject) => {
        const id = `${tag}_${i}`;
        starts.set(id, now());
        const body = Buffer.from(
          JSON.stringify({ id: `evt_${tag}_${i}`, event: 'message.inbound', created_at: new Date().toISOString(), data: eventData(i) }),
          'utf8',
        );
        const req = https.request({
          method: 'POST',
          hostname: '127.0.0.1',
          port,
          path: '/hook',
          agent,
          ...(agent === false && ca ? { ca } : {}),
          headers: {
            'Content-Type': 'application/json',
            'X-Concierge-Signature': signatureHeader(secret, body, Math.floor(Date.now() / 1000)),
            'X-Concierge-Event': 'message.inbound',
            'X-Concierge-Delivery': id,
            'User-Agent': USER_AGENT,
            'Content-Length': String(body.length),
          },
        });
        req.on('error', reject);
        req.on('response', (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`plain POST answered ${res.statusCode}`))));
        });
        req.end(body);
      });
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(concurrency, n) }, async () => {
        while (next < n) await post(next++);
      }),
    );
    const cpu1 = snap();
    const loop = stopLoop();
    if (agent) agent.destroy();
    const ids = [...starts.keys()];
    const missing = ids.filter((id) => !plainReceived.has(id));
    if (missing.length) throw new Error(`${target}: ${missing.length} POSTs answered but not recorded by the receiver`);
    const first = Math.min(...starts.values());
    const last = Math.max(...ids.map((id) => plainReceived.get(id)!));
    const latencies = ids.map((id) => plainReceived.get(id)! - starts.get(id)!);
    for (const id of ids) plainReceived.delete(id);
    const seconds = (last - first) / 1000;
    return {
      latencies,
      loop,
      cpu: cpuBetween(cpu0, cpu1, cpus),
      stats: runStats(target, round, seconds, n, latencies, concurrency, { '200': n }),
    };
  }

  /** Stage intervals over the given deliveries. */
  const stageSpreads = (ids: string[]): Record<string, Spread> => {
    const out: Record<string, Spread> = {};
    for (const [label, from, to] of STAGES) {
      out[label] = spread(ids.map((id) => marks.get(id)!).filter((m) => m[from] !== undefined && m[to] !== undefined).map((m) => m[to]! - m[from]!));
    }
    return out;
  };

  /** Server-side timings from the histories of a sample of workflows. */
  async function historyStages(ids: string[], sample: number): Promise<Record<string, Spread>> {
    if (!sample || !ids.length) return {};
    const E = temporal.api.enums.v1.EventType;
    const step = Math.max(1, Math.floor(ids.length / sample));
    const picked = ids.filter((_, i) => i % step === 0).slice(0, sample);
    const rows: Record<string, number[]> = {};
    const add = (k: string, v: number) => (rows[k] ??= []).push(v);
    for (const id of picked) {
      const history = await client.workflow.getHandle(deliveryWorkflowId(id)).fetchHistory();
      const times: Record<string, number[]> = {};
      for (const e of history.events ?? []) {
        const ts = e.eventTime;
        const wall = Number(ts?.seconds ?? 0) * 1000 + (ts?.nanos ?? 0) / 1e6;
        (times[E[e.eventType ?? 0] ?? String(e.eventType)] ??= []).push(wall - performance.timeOrigin);
      }
      const t = (name: string, i = 0) => times[`EVENT_TYPE_${name}`]?.[i] ?? NaN;
      const m = marks.get(id)!;
      add('start RPC sent -> WorkflowExecutionStarted (server)', t('WORKFLOW_EXECUTION_STARTED') - m.startCall!);
      add('WFT1 scheduled -> started (workflow task queue wait)', t('WORKFLOW_TASK_STARTED', 0) - t('WORKFLOW_TASK_SCHEDULED', 0));
      add('WFT1 started -> completed (worker runs the workflow)', t('WORKFLOW_TASK_COMPLETED', 0) - t('WORKFLOW_TASK_STARTED', 0));
      add('attempt scheduled -> started (activity task queue wait)', t('ACTIVITY_TASK_STARTED', 0) - t('ACTIVITY_TASK_SCHEDULED', 0));
      add('attempt started (server) -> running in the worker', m.attemptStart! - t('ACTIVITY_TASK_STARTED', 0));
      add('attempt done in the worker -> completed (server)', t('ACTIVITY_TASK_COMPLETED', 0) - m.attemptEnd!);
      add('WFT2 scheduled -> started', t('WORKFLOW_TASK_STARTED', 1) - t('WORKFLOW_TASK_SCHEDULED', 1));
      add('recordOutcome scheduled -> started', t('ACTIVITY_TASK_STARTED', 1) - t('ACTIVITY_TASK_SCHEDULED', 1));
      add('WFT3 scheduled -> workflow completed', t('WORKFLOW_EXECUTION_COMPLETED') - t('WORKFLOW_TASK_SCHEDULED', 2));
      add('workflow started -> completed', t('WORKFLOW_EXECUTION_COMPLETED') - t('WORKFLOW_EXECUTION_STARTED'));
      add('history events', (history.events ?? []).length);
    }
    const out: Record<string, Spread> = {};
    for (const [k, v] of Object.entries(rows)) out[k] = spread(v.filter(Number.isFinite));
    return out;
  }

  const printStages = (title: string, st: Record<string, Spread>) => {
    log(`    ${title} (p50 / p99 ms):`);
    for (const [k, v] of Object.entries(st)) log(`      ${k.padEnd(58)} ${ms(v.p50).padStart(8)} / ${ms(v.p99).padStart(8)}`);
  };
  const fmtRun = (r: RunStats, unit: string) =>
    `  ${r.target.padEnd(16)} ${(r.round === 0 ? 'warm-up' : `round ${r.round}`).padEnd(8)} ${r.requestsPerSec.toFixed(0).padStart(6)} ${unit.padEnd(12)} ` +
    `p50 ${ms(r.latencyP50Ms).padStart(7)} ms  p99 ${ms(r.latencyP99Ms).padStart(7)} ms  (${r.totalRequests} in ${r.durationSeconds.toFixed(2)} s)`;

  function verifySignatures(ids: string[]): void {
    for (const id of ids) {
      const hit = received.get(id)!;
      verifyWebhook(hit.body, hit.signature, secret);
    }
  }

  // ---- Warm-up: excluded from every figure.
  const runs: RunStats[] = [];
  if (s.warmupEvents > 0) {
    const w = await webhookRun(0, s.warmupEvents, s.concurrency);
    verifySignatures(w.ids);
    runs.push(w.stats);
    log(fmtRun(w.stats, 'deliveries/s') + ' (excluded)');
    for (const target of ['plain', 'plain-keepalive'] as const) {
      const p = await plainRun(target, 0, s.warmupEvents, s.concurrency);
      runs.push(p.stats);
      log(fmtRun(p.stats, 'posts/s') + ' (excluded)');
    }
  }

  // ---- Probes: one event at a time on an idle pipeline (unloaded latency and where it goes).
  let probe: { latency: Spread; stages: Record<string, Spread>; history: Record<string, Spread>; plainLatency: Spread } | null = null;
  if (s.probes > 0) {
    const ids: string[] = [];
    for (let i = 0; i < s.probes; i++) {
      const { deliveryIds } = await emitter.em.fork().transactional((tx) => emitEvent(tx, workspaceId, 'message.inbound', eventData(i)));
      mark(deliveryIds[0], 'emit');
      ids.push(deliveryIds[0]);
      await settle([deliveryIds[0]]);
    }
    verifySignatures(ids);
    const plain = await plainRun('plain', 0, s.probes, 1);
    probe = {
      latency: spread(ids.map((id) => marks.get(id)!.recv! - marks.get(id)!.emit!)),
      stages: stageSpreads(ids),
      history: await historyStages(ids, s.probes),
      plainLatency: spread(plain.latencies),
    };
    log(
      `  probes: ${s.probes} events one at a time on an idle pipeline: event->receipt p50 ${ms(probe.latency.p50)} ms, max ${ms(probe.latency.max)} ms ` +
        `(a plain POST, one at a time: p50 ${ms(probe.plainLatency.p50)} ms)`,
    );
    printStages('where an idle event spends its time, in process', probe.stages);
    printStages('and on the Temporal server (histories)', probe.history);
  }

  // ---- Measured: plain, webhook, plain, webhook, ..., plain.
  const plains: PlainPhase[] = [];
  const keepalives: PlainPhase[] = [];
  const webhooks: WebhookPhase[] = [];
  const roundDetails: Record<string, unknown>[] = [];
  const plainSlot = async (slot: number) => {
    for (const target of (slot % 2 === 1 ? ['plain', 'plain-keepalive'] : ['plain-keepalive', 'plain']) as Array<'plain' | 'plain-keepalive'>) {
      const p = await plainRun(target, slot, s.events, s.concurrency);
      (target === 'plain' ? plains : keepalives).push(p);
      runs.push(p.stats);
      log(fmtRun(p.stats, 'posts/s') + `  ${s.concurrency} in flight; ${formatCpu(p.cpu)}; ${fmtLoop(p.loop)}`);
    }
  };
  await plainSlot(1);
  for (let round = 1; round <= s.rounds; round++) {
    const w = await webhookRun(round, s.events, s.concurrency);
    verifySignatures(w.ids);
    webhooks.push(w);
    runs.push(w.stats);
    log(
      fmtRun(w.stats, 'deliveries/s') +
        `  attempts in flight: mean ${w.inflight.mean.toFixed(1)}, max ${w.inflight.max}; all settled ${w.settledSeconds.toFixed(2)} s after the first emit`,
    );
    log(`    last of each stage, s after the first emit commit: ${Object.entries(w.timeline).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}`);
    log(`    while delivering: ${formatCpu(w.cpu)}; ${fmtLoop(w.loop)}`);
    log(`    settling tail: ${formatCpu(w.cpuTail)}`);
    const stages = stageSpreads(w.ids);
    const history = await historyStages(w.ids, s.historySample);
    printStages(`stages of the ${s.events} deliveries, in process`, stages);
    printStages(`and on the Temporal server (${Math.min(s.historySample, w.ids.length)} sampled histories)`, history);
    roundDetails.push({ round, timelineSeconds: w.timeline, inflight: w.inflight, settledSeconds: w.settledSeconds, cpu: w.cpu, cpuTail: w.cpuTail, eventLoopDelayMs: w.loop, stages, history });
    await plainSlot(round + 1);
  }
  if (duplicates) throw new Error(`the receiver got ${duplicates} duplicate deliveries`);

  // ---- Figures.
  const [webhookSummary, plainSummary, keepaliveSummary] = ['webhook', 'plain', 'plain-keepalive'].map((t) => summarizeTarget(runs, t));
  const ratio = webhookSummary.meanRequestsPerSec / plainSummary.meanRequestsPerSec;
  const roundRatios = webhooks.map((w, k) => w.stats.requestsPerSec / mean([plains[k].stats.requestsPerSec, plains[k + 1].stats.requestsPerSec]));
  const comparison: Comparison = {
    name: 'webhook-fanout',
    subject: 'webhook',
    baseline: 'plain',
    subjectRequestsPerSec: webhookSummary.meanRequestsPerSec,
    baselineRequestsPerSec: plainSummary.meanRequestsPerSec,
    ratio,
    roundRatios,
    bestRatio: webhookSummary.bestRequestsPerSec / plainSummary.bestRequestsPerSec,
    target: TARGET_RATIO,
    pass: ratio >= TARGET_RATIO,
    subjectUnit: 'deliveries/s',
    baselineUnit: 'posts/s',
  };
  log(
    `  webhook-fanout: ${webhookSummary.meanRequestsPerSec.toFixed(0)} deliveries/s / plain ${plainSummary.meanRequestsPerSec.toFixed(0)} posts/s ` +
      `= ratio ${ratio.toFixed(2)} (goal >= ${TARGET_RATIO}) ${comparison.pass ? 'ok' : 'BELOW GOAL'}  [per round: ${roundRatios.map((r) => r.toFixed(2)).join(', ')}]`,
  );
  log(
    `    latency (event commit -> receipt / request start -> receipt): webhook p50 ${ms(webhookSummary.meanLatencyP50Ms)} ms, p99 ${ms(webhookSummary.meanLatencyP99Ms)} ms; ` +
      `plain p50 ${ms(plainSummary.meanLatencyP50Ms)} ms, p99 ${ms(plainSummary.meanLatencyP99Ms)} ms` +
      (probe ? `; idle webhook p50 ${ms(probe.latency.p50)} ms` : ''),
  );
  log(
    `    for reference, plain POSTs over ${s.concurrency} keep-alive connections: ${keepaliveSummary.meanRequestsPerSec.toFixed(0)} posts/s ` +
      `(webhook / keep-alive = ${(webhookSummary.meanRequestsPerSec / keepaliveSummary.meanRequestsPerSec).toFixed(2)}); the sender opens a fresh connection per POST by design`,
  );

  return {
    section: 'webhook-fanout',
    description:
      `${s.events} message.inbound events (one transaction each, ${s.concurrency} at a time) through outbox + dispatcher + Temporal delivery workflows to a local HTTPS receiver, ` +
      `vs the same number of plain signed HTTPS POSTs from Node (${s.concurrency} in flight, fresh connection each) to the same receiver`,
    settings: {
      events: s.events,
      warmupEvents: s.warmupEvents,
      probes: s.probes,
      rounds: s.rounds,
      concurrency: s.concurrency,
      timeoutSeconds: s.timeoutSeconds,
      historySample: s.historySample,
      tls: s.tls,
      temporal: 'temporal server start-dev, SQLite file',
      order: 'plain, webhook, plain, ..., plain: each webhook round against the mean of the plain runs around it; rates: N / (last receipt - first emit commit or first request start)',
    },
    runs,
    targets: [webhookSummary, plainSummary, keepaliveSummary],
    comparisons: [comparison],
    details: { probe, rounds: roundDetails, dispatchBatches: spread(dispatchBatches), plainCpu: plains.map((p) => p.cpu) },
  };
}

export async function benchWebhookFanout(log: (line: string) => void = console.log): Promise<Result> {
  const tls = process.env.BENCH_WEBHOOK_TLS ?? 'extra-ca';
  if (tls !== 'extra-ca' && tls !== 'ca-option') throw new Error(`BENCH_WEBHOOK_TLS=${tls}: expected extra-ca or ca-option`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-bench-pki-'));
  try {
    const pki = createTestPki();
    const pkiFile = path.join(dir, 'pki.json');
    fs.writeFileSync(pkiFile, JSON.stringify(pki), { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'ca.pem'), pki.ca);
    // NODE_EXTRA_CA_CERTS is read once at process start: the child trusts the test CA as production trusts its CAs.
    return await runInChild(__filename, 'webhook-fanout', log, { [PKI_FILE_ENV]: pkiFile, ...(tls === 'extra-ca' ? { NODE_EXTRA_CA_CERTS: path.join(dir, 'ca.pem') } : {}) });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) childMain(measure);
