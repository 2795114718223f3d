// What this measures and how to read it: docs/benchmarks.md#webhook-fanout-webhook-retry-path
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { policyFromCidrs } from '../lib/net/ssrf';
import { WebhookRepository } from '../domain/webhooks/emitter';
import { USER_AGENT } from '../domain/webhooks/sender';
import { signatureHeader, verifyWebhook } from '../lib/webhook-signature';
import { createTestPki, startHttpsReceiver, type TestPki } from '../dev/fakes/tls';
import { forkRole, section, serveRole, type Cleanup } from './lib/child';
import { envInt, envNumber, loadSettings } from './lib/load';
import { compose } from '../app/compose';
import { BENCH_KEY, benchCompose, benchConfig, benchTemporal, benchWorker, setUpBench } from './lib/setup';
import { around, below, comparison as compare, inLanes, mean, now, runStats, spread, summarizeTarget, waitFor, type Spread } from './lib/stats';
import type { Check, Result, RunStats } from './lib/types';

/** The webhook outbox, as the services write it (events are emitted in a transaction of the test's own). */
const outbox = new WebhookRepository();

const PKI_FILE_ENV = 'BENCH_WEBHOOK_PKI_FILE';
const MODE_ENV = 'BENCH_WEBHOOK_MODE';
type Mode = 'inline' | 'retry-path';
/** Goals: the production path at least half as fast as plain POSTs; the retry workflow alone a fifth. */
const TARGET_RATIO: Record<Mode, number> = { inline: 0.5, 'retry-path': 0.2 };
const SECTION: Record<Mode, string> = { inline: 'webhook-fanout', 'retry-path': 'webhook-retry-path' };
/** The steady-rate run: events per second, and the goal for the 99th percentile of event -> receipt. */
const RATE_PER_SEC = 100;
const RATE_P99_GOAL_MS = 250;
const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '-');

function loadWebhookSettings() {
  const { rounds, connections } = loadSettings();
  const [events, warmupEvents, rateEvents] = [envInt('BENCH_WEBHOOK_EVENTS', 500, 1), envInt('BENCH_WEBHOOK_WARMUP_EVENTS', 20, 0), envInt('BENCH_WEBHOOK_RATE_EVENTS', 500, 0)];
  const tls = process.env.BENCH_WEBHOOK_TLS === 'ca-option' ? ('ca-option' as const) : ('extra-ca' as const);
  // concurrency: in-flight plain POSTs, and concurrent emitting transactions on the webhook side.
  return { events, warmupEvents, rateEvents, timeoutSeconds: envNumber('BENCH_WEBHOOK_TIMEOUT_SECONDS', 300, 1), rounds, concurrency: connections, tls };
}

/** A message.inbound payload of a realistic size (the envelope is ~400 bytes). */
const TEXT = 'Hello! I ordered a blue jacket last week and would like to know whether it has shipped yet, and when it should arrive. Thanks.';
const eventData = (i: number) => ({ message_id: `msg_bench_${i}`, conversation_id: 'conv_bench', channel: 'msgapp', from: '+15550100100', text: TEXT });

/** Per delivery: when each stage happened (performance.now() ms). */
type Stage = 'emit' | 'picked' | 'leased' | 'startCall' | 'started' | 'attemptStart' | 'recv' | 'attemptEnd' | 'outcomeStart' | 'outcomeEnd';

/** The in-process stage intervals reported for every delivery: [label, from, to]. */
const STAGES: Array<[string, Stage, Stage]> = [
  ['emit commit -> dispatcher read it', 'emit', 'picked'],
  ['dispatcher read -> leased for its first attempt', 'picked', 'leased'],
  ['leased -> first attempt running', 'leased', 'attemptStart'],
  ['dispatcher read -> start RPC sent', 'picked', 'startCall'],
  ['start RPC (StartWorkflowExecution)', 'startCall', 'started'],
  ['workflow started -> attempt activity running', 'started', 'attemptStart'],
  ['attempt running -> receipt (select, sign, TLS connect, POST)', 'attemptStart', 'recv'],
  ['receipt -> attempt done (response; log write, settled with it on the inline path)', 'recv', 'attemptEnd'],
  ['attempt done -> recordOutcome running', 'attemptEnd', 'outcomeStart'],
  ['recordOutcome', 'outcomeStart', 'outcomeEnd'],
];

type Phase = { stats: RunStats; ids: string[] };

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = loadWebhookSettings();
  const mode = process.env[MODE_ENV] as Mode;
  if (!(mode in SECTION)) throw new Error(`${MODE_ENV}=${mode}: expected inline or retry-path`);
  const pki = JSON.parse(fs.readFileSync(process.env[PKI_FILE_ENV]!, 'utf8')) as TestPki;

  // ---- Stage marks, filled by the receiver and by the wrappers on the worker's instances.
  const marks = new Map<string, Partial<Record<Stage, number>>>();
  const mark = (id: string, stage: Stage, t = now()) => {
    const m = marks.get(id) ?? {};
    marks.set(id, m);
    m[stage] ??= t;
  };
  const problems: string[] = [];

  // ---- The receiver: HTTPS with the test certificate, 200 at once, receipt time per X-Concierge-Delivery.
  const received = new Map<string, { body: Buffer; signature: string }>();
  const plainReceived = new Map<string, number>();
  let duplicates = 0;
  const receiver = await startHttpsReceiver({
    pki,
    handler: (req, res) => {
      const at = now();
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      receiver.hits.length = 0; // its record of every request is not needed here
      const id = String(req.headers['x-concierge-delivery'] ?? '');
      if (!id.startsWith('dlv_')) return void plainReceived.set(id, at);
      if (received.has(id)) duplicates++;
      received.set(id, { body: req.rawBody, signature: String(req.headers['x-concierge-signature'] ?? '') });
      mark(id, 'recv', at);
    },
  });
  cleanup.push(['receiver', () => receiver.close()]);
  const { port } = receiver;
  const hookUrl = `${receiver.url}/hook`;

  // ---- The "API" process emitting events, and a worker process (relay, workflows, activities) instrumented from outside.
  const bench = await setUpBench(cleanup);
  const { workspaceId } = bench;
  // Deliveries may reach loopback (the receiver); with ca-option the sender trusts the test CA through its `ca` setting.
  const perSubscription = process.env.BENCH_WEBHOOK_INLINE_PER_SUBSCRIPTION;
  const composed = {
    config: {
      CONCIERGE_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
      ...(mode === 'retry-path' ? { CONCIERGE_WEBHOOK_INLINE_CONCURRENCY: 0 } : {}),
      ...(perSubscription ? { CONCIERGE_WEBHOOK_INLINE_PER_SUBSCRIPTION: Number(perSubscription) } : {}),
    },
    overrides: s.tls === 'ca-option' ? { services: { sender: { policy: policyFromCidrs('127.0.0.0/8'), timeoutMs: 10_000, ca: pki.ca } } } : {},
  };
  const admin = await benchCompose(bench, 'cli', composed);
  const subscription = await admin.services.subscriptions.create(workspaceId, hookUrl, ['message.inbound']);
  // Events come from a process of their own, as from the API in production (composed as the API is): the worker's process only delivers.
  const emitterEnv = { BENCH_WEBHOOK_DB: bench.db.url, BENCH_WEBHOOK_DIR: bench.dir, BENCH_WEBHOOK_WORKSPACE: workspaceId, BENCH_WEBHOOK_CONFIG: JSON.stringify({ ...composed.config, CONCIERGE_ENCRYPTION_KEY: BENCH_KEY }) };
  const emitter = await forkRole<EmitRequest, Emitted[]>(__filename, 'emitter', cleanup, emitterEnv);
  const dev = await benchTemporal(bench);
  const worker = await benchWorker(bench, dev, composed, (c) => {
    const deliveries = c.services.deliveries;
    around(deliveries, 'undispatched', () => undefined, (rows) => rows.forEach((r) => mark(r.id, 'picked')));
    around(deliveries, 'leaseFirstAttempts', () => undefined, (leased) => leased.forEach((id) => mark(id, 'leased')));
    around(deliveries, 'attempt', (id) => mark(id, 'attemptStart'), (r, id, _run, n) => {
      mark(id, 'attemptEnd');
      if (r.outcome !== 'delivered') problems.push(`${id} attempt ${n}: ${r.outcome} ${r.error ?? ''}`.trim());
    });
    // The relay's own first attempt: on success it settles the delivery in the same statement as its log record.
    around(deliveries, 'firstAttempt', (item) => mark(item.id, 'attemptStart'), (r, item) => {
      mark(item.id, 'attemptEnd');
      if (r.recorded) ['outcomeStart', 'outcomeEnd'].forEach((st) => mark(item.id, st as Stage));
      if (r.outcome !== 'delivered') problems.push(`${item.id} first attempt: ${r.outcome} ${r.error ?? ''}`.trim());
    });
    around(deliveries, 'recordOutcome', (id) => mark(id, 'outcomeStart'), (_r, id) => mark(id, 'outcomeEnd'));
    const markDelivery = (opts: { args?: unknown }, stage: Stage) => {
      const id = (opts.args as Array<{ deliveryId?: string }> | undefined)?.[0]?.deliveryId;
      if (id) mark(id, stage);
    };
    around(c.temporal!.client.workflow, 'start', (_t, opts) => markDelivery(opts, 'startCall'), (_h, _t, opts) => markDelivery(opts, 'started'));
  });
  const client = worker.temporal!.client;
  log(
    `  setup: Temporal dev server ${dev.address} (SQLite file), one worker with the outbox relay, HTTPS receiver ${hookUrl}; TLS trust: ${s.tls}; ` +
      (mode === 'inline' ? 'first attempt by the relay (production default)' : 'every delivery through its retry workflow from attempt 1'),
  );

  const count = (ids: string[], stage: Stage) => ids.filter((id) => marks.get(id)?.[stage] !== undefined).length;
  const progress = (ids: string[]) =>
    `of ${ids.length}: read ${count(ids, 'picked')}, started ${count(ids, 'started')}, received ${count(ids, 'recv')}, recorded ${count(ids, 'outcomeEnd')}; problems: ${problems.slice(0, 5).join('; ') || 'none'}`;
  const waitUntil = (cond: () => boolean | Promise<boolean>, what: () => string) => waitFor(cond, s.timeoutSeconds * 1000, what);
  /** Every delivery recorded as delivered and no delivery workflow still running. */
  async function settle(ids: string[]): Promise<void> {
    await waitUntil(() => count(ids, 'outcomeEnd') === ids.length, () => `waiting for outcomes ${progress(ids)}`);
    // No delivery failed, so on the inline path no retry workflow may exist at all.
    if (mode === 'inline' && count(ids, 'startCall') > 0) throw new Error(`${count(ids, 'startCall')} deliveries started a retry workflow although none failed`);
    const running = `WorkflowType = "webhookDeliveryWorkflow" AND ExecutionStatus = "Running"`;
    await waitUntil(async () => (await client.workflow.count(running)).count === 0, () => 'delivery workflows still running');
    const pendingSql = `select count(*) as pending from webhook_deliveries where status <> 'delivered' and id in (${ids.map(() => '?').join(',')})`;
    const [{ pending }] = await bench.db.orm.em.fork().execute<{ pending: string }[]>(pendingSql, ids);
    if (Number(pending) !== 0) throw new Error(`${pending} deliveries not marked delivered after settling`);
  }
  /** Events emitted by the API process; their commit times, on this process's clock, are the deliveries' 'emit' marks. */
  const emitted = (items: Emitted[]) =>
    items.map(({ id, at }) => {
      mark(id, 'emit', at - performance.timeOrigin);
      return id;
    });

  // ---- The webhook side: N events, each its own transaction, `concurrency` at a time; rate = N / (last receipt - first emit).
  async function webhookRun(round: number, n: number, concurrency: number): Promise<Phase> {
    const ids = emitted(await emitter.call({ kind: 'lanes', from: round * 100_000, n, concurrency }));
    await waitUntil(() => count(ids, 'recv') === ids.length, () => `webhook round ${round}: not every delivery arrived ${progress(ids)}`);
    await settle(ids);
    if (problems.length) throw new Error(`webhook round ${round}: attempts that did not deliver: ${problems.slice(0, 5).join('; ')}`);
    for (const id of ids) verifyWebhook(received.get(id)!.body, received.get(id)!.signature, subscription.secret);
    const at = (id: string, st: Stage) => marks.get(id)![st]!;
    const seconds = (Math.max(...ids.map((id) => at(id, 'recv'))) - Math.min(...ids.map((id) => at(id, 'emit')))) / 1000;
    return { ids, stats: runStats('webhook', round, seconds, n, ids.map((id) => at(id, 'recv') - at(id, 'emit')), concurrency, { '200': n }) };
  }

  // ---- The baseline: the same receiver, a similar signed body, straight from Node (`plain`: a fresh TLS connection per POST, as the sender makes).
  async function plainRun(target: 'plain' | 'plain-keepalive', round: number, n: number, concurrency: number): Promise<Phase> {
    const ca = s.tls === 'ca-option' ? pki.ca : undefined;
    const agent = target === 'plain' ? false : new https.Agent({ keepAlive: true, maxSockets: concurrency, ca });
    const tag = `${target}_${round}_${randomBytes(3).toString('hex')}`;
    const starts = new Map<string, number>();
    await inLanes(n, concurrency, (i) =>
      new Promise<void>((resolve, reject) => {
        const id = `${tag}_${i}`;
        starts.set(id, now());
        const body = Buffer.from(JSON.stringify({ id: `evt_${tag}_${i}`, event: 'message.inbound', created_at: new Date().toISOString(), data: eventData(i) }));
        const signature = signatureHeader(subscription.secret, body, Math.floor(Date.now() / 1000));
        const headers = { 'Content-Type': 'application/json', 'X-Concierge-Signature': signature, 'X-Concierge-Event': 'message.inbound', 'X-Concierge-Delivery': id, 'User-Agent': USER_AGENT, 'Content-Length': String(body.length) };
        const req = https.request({ method: 'POST', hostname: '127.0.0.1', port, path: '/hook', agent, ...(agent === false && ca ? { ca } : {}), headers });
        req.on('error', reject);
        req.on('response', (res) => res.resume().on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`plain POST answered ${res.statusCode}`)))));
        req.end(body);
      }),
    );
    if (agent) agent.destroy();
    const ids = [...starts.keys()];
    if (ids.some((id) => !plainReceived.has(id))) throw new Error(`${target}: POSTs answered but not recorded by the receiver`);
    const seconds = (Math.max(...ids.map((id) => plainReceived.get(id)!)) - Math.min(...starts.values())) / 1000;
    const latencies = ids.map((id) => plainReceived.get(id)! - starts.get(id)!);
    for (const id of ids) plainReceived.delete(id);
    return { ids, stats: runStats(target, round, seconds, n, latencies, concurrency, { '200': n }) };
  }

  const stageSpreads = (ids: string[]): Record<string, Spread> =>
    Object.fromEntries(STAGES.map(([label, from, to]) => [label, spread(ids.map((id) => marks.get(id)!).filter((m) => m[from] !== undefined && m[to] !== undefined).map((m) => m[to]! - m[from]!))]));
  const printStages = (title: string, st: Record<string, Spread>) => {
    log(`    ${title} (p50 / p99 ms):`);
    for (const [k, v] of Object.entries(st)) log(`      ${k.padEnd(58)} ${ms(v.p50).padStart(8)} / ${ms(v.p99).padStart(8)}`);
  };
  const runs: RunStats[] = [];
  const record = (p: Phase, unit: string, note = '') => {
    const r = p.stats;
    runs.push(r);
    log(
      `  ${r.target.padEnd(16)} ${(r.round === 0 ? 'warm-up' : `round ${r.round}`).padEnd(8)} ${r.requestsPerSec.toFixed(0).padStart(6)} ${unit.padEnd(12)} ` +
        `p50 ${ms(r.latencyP50Ms).padStart(7)} ms  p99 ${ms(r.latencyP99Ms).padStart(7)} ms  (${r.totalRequests} in ${r.durationSeconds.toFixed(2)} s)  ${note}`,
    );
    return p;
  };

  // ---- Warm-up (excluded), then plain, webhook, plain, ..., plain.
  if (s.warmupEvents > 0) {
    record(await webhookRun(0, s.warmupEvents, s.concurrency), 'deliveries/s', '(excluded)');
    for (const t of ['plain', 'plain-keepalive'] as const) record(await plainRun(t, 0, s.warmupEvents, s.concurrency), 'posts/s', '(excluded)');
    runs.length = 0;
  }
  const plains: Phase[] = [];
  const webhooks: Phase[] = [];
  const plainSlot = async (slot: number) => {
    for (const t of (slot % 2 === 1 ? ['plain', 'plain-keepalive'] : ['plain-keepalive', 'plain']) as Array<'plain' | 'plain-keepalive'>) {
      const p = record(await plainRun(t, slot, s.events, s.concurrency), 'posts/s');
      if (t === 'plain') plains.push(p);
    }
  };
  const roundStages: Record<string, Spread>[] = [];
  await plainSlot(1);
  for (let round = 1; round <= s.rounds; round++) {
    const w = record(await webhookRun(round, s.events, s.concurrency), 'deliveries/s');
    webhooks.push(w);
    roundStages.push(stageSpreads(w.ids));
    printStages(`stages of the ${s.events} deliveries`, roundStages[roundStages.length - 1]);
    await plainSlot(round + 1);
  }
  // ---- Inline path: event -> receipt at a steady rate (each event its own transaction, emitted on schedule, not in lanes).
  const checks: Check[] = [];
  let rate: { p50: number; p99: number; n: number } | null = null;
  if (mode === 'inline' && s.rateEvents > 0) {
    const ids = emitted(await emitter.call({ kind: 'rate', from: 1_000_000, n: s.rateEvents, perSec: RATE_PER_SEC }));
    await waitUntil(() => count(ids, 'recv') === ids.length, () => `steady-rate run: not every delivery arrived ${progress(ids)}`);
    await settle(ids);
    const lat = spread(ids.map((id) => marks.get(id)!.recv! - marks.get(id)!.emit!));
    rate = { p50: lat.p50, p99: lat.p99, n: ids.length };
    log(`  steady ${RATE_PER_SEC} events/s (${ids.length} events): event commit -> receipt p50 ${ms(lat.p50)} ms, p99 ${ms(lat.p99)} ms (goal p99 < ${RATE_P99_GOAL_MS} ms)`);
    printStages('stages at the steady rate', stageSpreads(ids));
    checks.push(
      { name: `webhook event -> receipt p50 at ${RATE_PER_SEC} events/s`, value: lat.p50, unit: 'ms', goal: '(reported)', pass: true },
      below(`webhook event -> receipt p99 at ${RATE_PER_SEC} events/s`, lat.p99, 'ms', RATE_P99_GOAL_MS),
    );
  }
  if (duplicates) throw new Error(`the receiver got ${duplicates} duplicate deliveries`);

  // ---- Figures: each webhook round against the mean of the plain runs around it.
  const [webhookSummary, plainSummary, keepaliveSummary] = ['webhook', 'plain', 'plain-keepalive'].map((t) => summarizeTarget(runs, t));
  const ratio = webhookSummary.meanRequestsPerSec / plainSummary.meanRequestsPerSec;
  const roundRatios = webhooks.map((w, k) => w.stats.requestsPerSec / mean([plains[k].stats.requestsPerSec, plains[k + 1].stats.requestsPerSec]));
  const target = TARGET_RATIO[mode];
  const comparison = compare(
    { name: SECTION[mode], subject: 'webhook', baseline: 'plain', subjectUnit: 'deliveries/s', baselineUnit: 'posts/s' },
    { subject: webhookSummary.meanRequestsPerSec, baseline: plainSummary.meanRequestsPerSec, target, best: webhookSummary.bestRequestsPerSec / plainSummary.bestRequestsPerSec, rounds: roundRatios },
  );
  log(
    `  ${SECTION[mode]}: ${webhookSummary.meanRequestsPerSec.toFixed(0)} deliveries/s / plain ${plainSummary.meanRequestsPerSec.toFixed(0)} posts/s = ratio ${ratio.toFixed(2)} ` +
      `(goal >= ${target}) ${comparison.pass ? 'ok' : 'BELOW GOAL'}; latency p50 ${ms(webhookSummary.meanLatencyP50Ms)} ms vs plain ${ms(plainSummary.meanLatencyP50Ms)} ms; ` +
      `keep-alive plain ${keepaliveSummary.meanRequestsPerSec.toFixed(0)} posts/s (the sender opens a fresh connection per POST by design)`,
  );
  return {
    section: SECTION[mode],
    description: `${s.events} message.inbound events (${s.concurrency} at a time) delivered to a local HTTPS receiver (${mode}) vs as many plain signed HTTPS POSTs (${s.concurrency} in flight)`,
    settings: { ...s, mode, temporal: 'temporal server start-dev, SQLite file', order: 'plain, webhook, plain, ..., plain; rates: N / (last receipt - first emit or request start)' },
    runs,
    targets: [webhookSummary, plainSummary, keepaliveSummary],
    comparisons: [comparison],
    checks,
    details: { roundStages, steadyRate: rate },
  };
}

async function runWebhookSection(mode: Mode, log: (line: string) => void): Promise<Result> {
  const tls = process.env.BENCH_WEBHOOK_TLS ?? 'extra-ca';
  if (tls !== 'extra-ca' && tls !== 'ca-option') throw new Error(`BENCH_WEBHOOK_TLS=${tls}: expected extra-ca or ca-option`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-bench-pki-'));
  try {
    const pki = createTestPki();
    const pkiFile = path.join(dir, 'pki.json');
    fs.writeFileSync(pkiFile, JSON.stringify(pki), { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'ca.pem'), pki.ca);
    // NODE_EXTRA_CA_CERTS is read once at process start: the child trusts the test CA as production trusts its CAs.
    return await inChild(log, { name: SECTION[mode], env: { [PKI_FILE_ENV]: pkiFile, [MODE_ENV]: mode, ...(tls === 'extra-ca' ? { NODE_EXTRA_CA_CERTS: path.join(dir, 'ca.pem') } : {}) } });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// ---- The API process's part: emitting events (emitEvent in its own transaction each), on request of the measuring process.

type EmitRequest = { kind: 'lanes'; from: number; n: number; concurrency: number } | { kind: 'rate'; from: number; n: number; perSec: number };
/** A delivery and when its event committed (epoch ms, sub-millisecond). */
type Emitted = { id: string; at: number };

/** The API process: composed as the API is, it emits events when asked. */
const emitterRole = () =>
  serveRole<EmitRequest, Emitted[]>(async () => {
    const config = benchConfig(process.env.BENCH_WEBHOOK_DIR!, JSON.parse(process.env.BENCH_WEBHOOK_CONFIG ?? '{}'));
    const c = await compose(config, { role: 'cli', databaseUrl: process.env.BENCH_WEBHOOK_DB!, embedded: false });
    const workspaceId = process.env.BENCH_WEBHOOK_WORKSPACE!;
    const emitOne = async (i: number): Promise<Emitted> => {
      const { deliveryIds } = await c.em.fork().transactional((tx) => outbox.emitEvent(tx, workspaceId, 'message.inbound', eventData(i)));
      const at = performance.timeOrigin + performance.now();
      if (deliveryIds.length !== 1) throw new Error(`event ${i} made ${deliveryIds.length} deliveries, expected 1`);
      return { id: deliveryIds[0], at };
    };
    const handle = async (m: EmitRequest) => {
      const items: Emitted[] = [];
      if (m.kind === 'lanes') await inLanes(m.n, m.concurrency, async (i) => void items.push(await emitOne(m.from + i)));
      else {
        // Each event on its schedule, not after the previous one: a steady rate whatever the commit latency.
        const t0 = performance.now();
        const emits: Promise<void>[] = [];
        for (let i = 0; i < m.n; i++) {
          const wait = t0 + (i * 1000) / m.perSec - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          emits.push(emitOne(m.from + i).then((e) => void items.push(e)));
        }
        await Promise.all(emits);
      }
      return items;
    };
    return { handle, stop: () => c.close() };
  });

const inChild = section(module, 'webhook-fanout', measure, { roles: { emitter: emitterRole } });
/** The production path: the relay's first attempt (retry workflows only for failures). */
export const benchWebhookFanout = (log: (line: string) => void = console.log) => runWebhookSection('inline', log);
/** The retry workflow alone, every delivery from attempt 1. */
export const benchWebhookRetryPath = (log: (line: string) => void = console.log) => runWebhookSection('retry-path', log);
