// What this measures and how to read it: docs/benchmarks.md#msgapp-agent-reply
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { temporal } from '@temporalio/proto';
import type { Composition } from '../app/compose';
import type { SendPlan } from '../domain/messaging/plan';
import type { InboundParty } from '../domain/messaging/provider-events';
import { CloudApiProvider } from '../providers/msgapp/cloud-api';
import { agentReplyId } from '../app/temporal-clients/conversations';
import { startMsgappSandbox, type SentRecord } from '../dev/fake-msgapp';
import { section, type Cleanup } from './lib/child';
import { envInt, envNumber } from './lib/load';
import { benchEmbedder, benchLlm, benchStack, setUpBench } from './lib/setup';
import { alternate, around, below, ms, now, overhead, p50p99, percentile, round1, sequentialRun, spread, summarizeTarget, waitFor, type Spread } from './lib/stats';
import type { Result } from './lib/types';
import { publishAgent } from './lib/widget';

const GOAL_OVERHEAD_P50_MS = 150;
const APP_SECRET = 'bench-app-secret';
const ACCESS_TOKEN = 'bench-token';
const NUMBER = { id: '1066', display: '+15550001066' };
const INSTRUCTIONS = 'Help customers with their orders.';
/** The fake model's answer to everything. */
const REPLY_TEXT = 'Your order shipped yesterday and should arrive within two days.';
/** When the sandbox reports the reply delivered and read (its default: 300 and 600 ms). */
const STATUS_DELAYS_MS = { delivered: 20, read: 40 };
/** A reply that has not reached the provider this long after the message fails the section. */
const REPLY_TIMEOUT_MS = 30_000;

const settings = () => ({
  samples: envInt('BENCH_MSGAPP_AGENT_SAMPLES', 60, 1), warmup: envInt('BENCH_MSGAPP_AGENT_WARMUP', 10, 0),
  llmDelayMs: envNumber('BENCH_MSGAPP_AGENT_LLM_DELAY_MS', 50, 0), oneProcess: process.env.BENCH_MSGAPP_AGENT_SPLIT !== '1',
});

/** The steps of one subject sample, in path order (performance.now() of each, first occurrence). */
const STEPS = [
  ['webhookStored', 'webhook: message recorded, message.inbound emitted (accept returned)'], ['webhook200', 'webhook 200 at the provider'],
  ['handStart', 'relay: hand to the actor starts (agentSilence)'],
  ['signalStart', 'signal-with-start of the actor called'], ['signalEnd', 'signal-with-start returned (the actor has it)'],
  ['turnStart', 'actor: agent turn starts'], ['modelRequest', 'model: request arrives at the fake LLM'], ['turnEnd', 'actor: agent turn ends'],
  ['planStart', 'actor: reply send planned (starts)'], ['planEnd', 'actor: reply send planned (ends)'],
  ['sendRecord', 'message-send child: record activity starts'], ['providerCall', 'message-send child: provider call starts'],
  ['provider', 'provider: send received (the end)'], ['sendMarked', 'message-send child: marked sent (after the end)'],
] as const;
type Step = (typeof STEPS)[number][0];
type Marks = Partial<Record<Step, number>>;

/** Milliseconds from injectInbound (or the direct calls' start) to each mark. */
type Sample = { total: number; marks: Marks };

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = settings();
  const bench = await setUpBench(cleanup);

  // ---- The fake model (when each request arrived, by its last user message: unique per sample).
  const llm = await benchLlm(bench, REPLY_TEXT, { firstByteDelayMs: s.llmDelayMs });

  // ---- The provider: the sandbox, its `sent` records timed as they are pushed (the send's request handled).
  // Status callbacks (sent, delivered, read) come back as from the real API, soon enough that each sample's have all
  // been POSTed (sandbox.idle) before the next sample starts: samples do not overlap another reply's callbacks.
  const numbers = [{ phoneNumberId: NUMBER.id, displayPhoneNumber: NUMBER.display, accessToken: ACCESS_TOKEN }];
  const sandbox = await startMsgappSandbox({ appSecret: APP_SECRET, statusDelaysMs: STATUS_DELAYS_MS, numbers });
  cleanup.push(['msgapp sandbox', () => sandbox.close()]);
  const waiting = new Map<string, (r: SentRecord, at: number) => void>();
  const push = sandbox.sent.push.bind(sandbox.sent);
  sandbox.sent.push = (...records: SentRecord[]) => {
    const at = now();
    for (const r of records) waiting.get(String(r.body.to))?.(r, at);
    return push(...records);
  };
  const provider = new CloudApiProvider({ baseUrl: sandbox.url, timeoutMs: 10_000 });

  // ---- Per-step marks of the sample in flight, keyed by the ids each step knows.
  const marks = new Map<string, Marks>(); // by wamid
  const wamidOf = new Map<string, string>(); // message id, reply id, conversation id -> wamid
  const conversationOf = new Map<string, string>(); // wamid -> conversation id
  /** The last subject sample (BENCH_MSGAPP_AGENT_HISTORY). */
  const lastSample = { wamid: '', t0: 0 };
  // The webhook's mark (and maybe the relay's) comes before injectInbound returns the wamid: a wamid seen first opens its entry.
  const mark = (key: string | undefined, step: Step) => {
    if (key === undefined) return;
    const wamid = wamidOf.get(key) ?? key;
    let m = marks.get(wamid);
    if (!m && wamid.startsWith('wamid.')) marks.set(wamid, (m = {}));
    if (m) m[step] ??= now();
  };
  const instrument = (c: Composition) => {
    const { providerEvents, turns, messages } = c.services;
    around(providerEvents, 'accept', () => undefined, (_r, msg) => mark(msg.providerMessageId, 'webhookStored'));
    // A text message is recorded by the webhook (accept); the relay hands it to the conversation's actor.
    around(providerEvents, 'handToAgent', (_actor, input: { providerMessageId: string; messageId: string; party: InboundParty }) => {
      wamidOf.set(input.messageId, input.providerMessageId);
      wamidOf.set(agentReplyId(input.messageId), input.providerMessageId);
      wamidOf.set(input.party.conversationId, input.providerMessageId);
      conversationOf.set(input.providerMessageId, input.party.conversationId);
      mark(input.providerMessageId, 'handStart');
    }, () => undefined);
    around(turns, 'run', (input) => mark(input.messageId, 'turnStart'), (_r, input) => mark(input.messageId, 'turnEnd'));
    around(messages, 'planReply', (_conv, replyId) => mark(replyId, 'planStart'), (_r, _conv, replyId) => mark(replyId, 'planEnd'));
    around(messages, 'record', (plan: SendPlan) => mark(plan.messageId, 'sendRecord'), () => undefined);
    around(messages, 'callProvider', (plan: SendPlan) => mark(plan.messageId, 'providerCall'), () => undefined);
    around(messages, 'markSent', () => undefined, (_r, plan: SendPlan) => mark(plan.messageId, 'sendMarked'));
    const wf = c.temporal?.client.workflow;
    if (wf) {
      const messageIdOf = (o: { signalArgs?: unknown }) => (o.signalArgs as Array<{ messageId?: string }> | undefined)?.[0]?.messageId;
      around(wf, 'signalWithStart', (_w, o) => mark(messageIdOf(o), 'signalStart'), (_r, _w, o) => mark(messageIdOf(o), 'signalEnd'));
    }
  };

  // ---- The service: one composition (npm start) or API and worker apart; the real local embedder for the turn's retrieval.
  const embedder = benchEmbedder(bench);
  await embedder.load();
  const config = { MSGAPP_API_BASE: sandbox.url, MSGAPP_APP_SECRET: APP_SECRET, MSGAPP_VERIFY_TOKEN: 'bench-verify' };
  const { dev, api } = await benchStack(bench, { oneProcess: s.oneProcess, config, overrides: { embedder: async () => embedder, services: { llm: llm.settings } }, instrument });
  if (!s.oneProcess) instrument(api.c);
  sandbox.setWebhookUrl(`${api.url}/webhooks/msgapp`);
  const credentialId = (await api.c.services.credentials.create(bench.workspaceId, 'msgapp_access_token', 'bench number', ACCESS_TOKEN)).id;
  const { agentId } = await publishAgent(api, bench.workspaceId, {
    name: 'Bench msgapp helper',
    instructions: INSTRUCTIONS,
    triggers: { msgapp: { number: NUMBER.display, phone_number_id: NUMBER.id, credential_id: credentialId } },
    actions: [{ type: 'sender' }],
  });
  log(
    `  setup: API ${api.url}, ${s.oneProcess ? "one composition (role both; the API's client on the worker's native connection, as npm start)" : 'API and worker as two compositions'}, ` +
      `Temporal dev server ${dev.address} (SQLite file), msgapp sandbox ${sandbox.url}, fake model ${llm.url} (answer after ${s.llmDelayMs} ms), agent ${agentId}`,
  );

  // ---- The two sides. Each sample's text is unique (the model's request is matched to it); each customer has a number of its own.
  let n = 0;
  const modelSaw = llm.saw;
  const sentTo = (to: string, t0: number) =>
    new Promise<{ record: SentRecord; at: number }>((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.delete(to);
        reject(new Error(`no reply reached the provider for ${to} within ${REPLY_TIMEOUT_MS / 1000} s`));
      }, REPLY_TIMEOUT_MS);
      waiting.set(to, (record, at) => {
        if (at < t0) return;
        clearTimeout(timer);
        waiting.delete(to);
        resolve({ record, at });
      });
    });
  const subject = async (customer: string): Promise<Sample> => {
    const text = `m${n++} where is my order?`;
    const t0 = now();
    const arrived = sentTo(customer, t0);
    const sent = await sandbox.injectInbound({ from: customer, to: NUMBER.id, text, profileName: 'Bench Customer' });
    const webhook200 = now();
    Object.assign(lastSample, { wamid: sent.providerMessageId, t0 });
    if (sent.webhookStatus !== 200) throw new Error(`the webhook answered ${sent.webhookStatus}`);
    const m: Marks = marks.get(sent.providerMessageId) ?? {};
    marks.set(sent.providerMessageId, m);
    m.webhook200 = webhook200;
    const { record, at } = await arrived;
    const body = record.body as { text?: { body?: string } };
    if (body.text?.body !== REPLY_TEXT) throw new Error(`the reply to ${customer} was ${JSON.stringify(record.body)}, expected the model's text`);
    m.provider = at;
    m.modelRequest = modelSaw(text);
    // The send workflow's last step done and the reply's statuses POSTed back before the next sample.
    await waitFor(() => m.sendMarked !== undefined, REPLY_TIMEOUT_MS, () => `the reply to ${customer} was not marked sent`, 1);
    await sandbox.idle();
    marks.delete(sent.providerMessageId);
    const rel: Marks = {};
    for (const [k, v] of Object.entries(m) as Array<[Step, number]>) rel[k] = v - t0;
    return { total: at - t0, marks: rel };
  };
  const baseline = async (): Promise<Sample> => {
    const text = `b${n++} where is my order?`;
    const to = `+1555900${String(n % 10_000).padStart(4, '0')}`;
    const t0 = now();
    const out = await llm.model.complete({ messages: [{ role: 'system', content: INSTRUCTIONS }, { role: 'user', content: text }] });
    const answered = now();
    const r = await provider.send({ phoneNumberId: NUMBER.id, accessToken: ACCESS_TOKEN, to, content: { kind: 'text', text: out.text }, clientMessageId: `msg_bench${randomBytes(8).toString('hex')}` });
    const end = now();
    if (out.text !== REPLY_TEXT || !r.providerMessageId) throw new Error(`the direct path returned ${JSON.stringify(out.text)} / ${JSON.stringify(r)}`);
    return { total: end - t0, marks: { modelRequest: (modelSaw(text) ?? NaN) - t0, turnEnd: answered - t0, provider: end - t0 } };
  };

  /** One sample per side per customer, alternating. */
  const series = (customers: string[]) => alternate(customers.length, (i) => subject(customers[i]), baseline);
  const customersFrom = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `+1555${prefix}${String(i).padStart(4, '0')}`);

  // ---- Warm-up: new conversations, then the same customers again (workflow and activity code, pools, JIT).
  if (s.warmup > 0) {
    const t0 = now();
    const warm = customersFrom('700', s.warmup);
    await series(warm);
    await series(warm);
    log(`  warm-up: ${s.warmup} customers, two messages each, in ${((now() - t0) / 1000).toFixed(1)} s`);
  }

  /** BENCH_MSGAPP_AGENT_HISTORY=1: the Temporal events of the last sample's three workflows, in ms since the message was injected. */
  const showHistory = async (name: string) => {
    if (process.env.BENCH_MSGAPP_AGENT_HISTORY !== '1' || !lastSample.wamid) return;
    const client = api.c.temporal!.client;
    const wall = performance.timeOrigin + lastSample.t0;
    const inbound = client.workflow.getHandle(`msgapp-inbound:${lastSample.wamid}`);
    const result = (await inbound.result()) as { messageId: string };
    const events: Array<[number, string]> = [];
    for (const [label, id] of [['inbound', `msgapp-inbound:${lastSample.wamid}`], ['actor', `conversation:${conversationOf.get(lastSample.wamid)}`], ['send', `message-send:${agentReplyId(result.messageId)}`]] as const) {
      const h = await client.workflow.getHandle(id).fetchHistory();
      for (const e of h.events ?? []) {
        const at = Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor(Number(e.eventTime?.nanos ?? 0) / 1e6);
        const type = String(temporal.api.enums.v1.EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, '');
        if (at >= wall - 5) events.push([at - wall, `${label} ${type}${e.activityTaskScheduledEventAttributes?.activityType?.name ? ` ${e.activityTaskScheduledEventAttributes.activityType.name}` : ''}`]);
      }
    }
    log(`  Temporal events of the last ${name} sample (ms since injected):`);
    for (const [at, what] of events.sort((a, b) => a[0] - b[0])) log(`    ${at.toFixed(0).padStart(5)}  ${what}`);
  };

  const customers = customersFrom('800', s.samples);
  const t0 = now();
  const cold = await series(customers);
  const coldSeconds = (now() - t0) / 1000;
  await showHistory('new-conversation');
  const t1 = now();
  const warm = await series(customers);
  const warmSeconds = (now() - t1) / 1000;
  await showHistory('running-actor');

  // ---- Figures.
  const totals = (xs: Sample[]) => xs.map((x) => x.total);
  const fCold = overhead(totals(cold.subject), totals(cold.baseline));
  const fWarm = overhead(totals(warm.subject), totals(warm.baseline));
  /** Per step: p50 of its time since the message, and p50 of the gap from the step before it (samples having both). */
  const breakdown = (xs: Sample[]) => {
    const rows: Array<{ step: Step; label: string; atP50: number; gapP50: number; gapP99: number; n: number }> = [];
    let prev: Step | null = null;
    for (const [step, label] of STEPS) {
      const at = xs.map((x) => x.marks[step]).filter((v): v is number => v !== undefined && Number.isFinite(v));
      if (!at.length) continue;
      const gaps = prev ? xs.filter((x) => x.marks[step] !== undefined && x.marks[prev!] !== undefined).map((x) => x.marks[step]! - x.marks[prev!]!) : at;
      rows.push({ step, label, atP50: round1(percentile(at, 50)), gapP50: round1(percentile(gaps, 50)), gapP99: round1(percentile(gaps, 99)), n: at.length });
      prev = step;
    }
    return rows;
  };
  const bCold = breakdown(cold.subject);
  const bWarm = breakdown(warm.subject);
  const baseModel = spread([...cold.baseline, ...warm.baseline].map((x) => x.marks.turnEnd!));
  const baseSend = spread([...cold.baseline, ...warm.baseline].map((x) => x.total - x.marks.turnEnd!));

  const run = (target: string, xs: Sample[], seconds: number, status: string) => sequentialRun(target, totals(xs), { [status]: xs.length }, seconds);
  const runs = [run('msgapp reply, new conversation', cold.subject, coldSeconds, '200'), run('msgapp reply, running actor', warm.subject, warmSeconds, '200')];
  runs.push(run('model + send direct', [...cold.baseline, ...warm.baseline], coldSeconds + warmSeconds, 'ok'));
  const targets = runs.map((r) => summarizeTarget(runs, r.target));
  const check = below('msgapp-agent-reply overhead p50 (running actor)', fWarm.overhead.p50, 'ms', GOAL_OVERHEAD_P50_MS);
  const line = (name: string, f: typeof fCold) =>
    `msgapp-agent-reply (${name}): message → reply at the provider ${p50p99(f.subject)} / model + send direct ${p50p99(f.baseline)} → overhead ${p50p99(f.overhead)}`;
  const stages = (name: string, rows: ReturnType<typeof breakdown>) =>
    `msgapp-agent-reply stages (${name}, p50 gap from the step before): ${rows.map((r) => `${r.step} +${ms(r.gapP50)}`).join(', ')}`;
  const headlines = [
    line('running actor, the same customers again', fWarm),
    line('new conversation, each customer\'s first message', fCold),
    stages('running actor', bWarm),
    stages('new conversation', bCold),
    `msgapp-agent-reply baseline parts (p50): model ${ms(baseModel.p50)} ms, provider send ${ms(baseSend.p50)} ms; ${s.samples} customers, model answers after ${s.llmDelayMs} ms`,
  ];
  const table = (name: string, rows: ReturnType<typeof breakdown>) => {
    log(`  breakdown (${name}), ms since the message was injected:`);
    for (const r of rows) log(`    ${r.label.padEnd(52)} at p50 ${ms(r.atP50).padStart(6)}   gap p50 ${ms(r.gapP50).padStart(6)}  p99 ${ms(r.gapP99).padStart(6)}`);
  };
  table('running actor', bWarm);
  table('new conversation', bCold);

  const figures: Record<string, Spread> = {
    warmSubject: fWarm.subject, warmBaseline: fWarm.baseline, warmOverhead: fWarm.overhead,
    coldSubject: fCold.subject, coldBaseline: fCold.baseline, coldOverhead: fCold.overhead, baselineModel: baseModel, baselineSend: baseSend,
  };
  return {
    section: 'msgapp-agent-reply',
    description: `${s.samples} customers' msgapp messages, new conversation then running actor → the agent's reply at the provider, against the model + one provider send; req/s = 1000 / mean time`,
    settings: { ...s, coldSeconds: round1(coldSeconds), warmSeconds: round1(warmSeconds), statusDelaysMs: STATUS_DELAYS_MS, loadAverage: os.loadavg().map(round1) },
    runs,
    targets,
    checks: [check],
    headlines,
    details: { latencyMs: figures, breakdownMs: { runningActor: bWarm, newConversation: bCold } },
  };
}

export const benchMsgappAgentReply = section(module, 'msgapp-agent-reply', measure, { env: { LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' } });
