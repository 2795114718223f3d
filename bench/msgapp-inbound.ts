// What this measures and how to read it: docs/benchmarks.md#msgapp-inbound
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { USER_AGENT } from '../domain/webhooks/sender';
import { signatureHeader, verifyWebhook } from '../lib/webhook-signature';
import { signHubPayload } from '../providers/msgapp/cloud-api';
import { startMsgappSandbox } from '../dev/fake-msgapp';
import { newWamid } from '../dev/fake-msgapp/graph';
import { createTestPki, startHttpsReceiver, type TestPki } from '../dev/fakes/tls';
import { forkRole, section, serveRole, type Cleanup } from './lib/child';
import { envInt, envNumber, loadSettings } from './lib/load';
import type { Composition } from '../app/compose';
import { benchStack, setUpBench } from './lib/setup';
import { around, below, comparison as compare, inLanes, mean, ms, now, p50p99, runStats, spread, summarizeTarget, waitFor, type Spread } from './lib/stats';
import type { Check, Result, RunStats } from './lib/types';
import { publishAgent } from './lib/widget';

const PKI_FILE_ENV = 'BENCH_MSGAPP_INBOUND_PKI_FILE';
const APP_SECRET = 'bench-app-secret';
const NUMBER = { id: '1077', display: '+15550001077' };
/** The carrier's load (issue 33): inbound messages and status updates per second, and the acknowledgement goal. */
const INBOUND_PER_SEC = 100;
const STATUSES_PER_SEC = 300;
const ACK_P99_GOAL_MS = 100;
/** Inbound message -> subscriber's receipt at the steady rate, and the end-to-end rate against plain POSTs. */
const RECEIPT_P99_GOAL_MS = 1000;
const TARGET_RATIO = 0.3;
/** Keep-alive connections the carrier may open to the webhook (a request waits for a free one; its wait counts). */
const CARRIER_SOCKETS = 32;
/** A realistic customer message; each one's text starts with a tag of its own, by which its event is matched. */
const TEXT = 'I ordered a blue jacket last week and would like to know whether it has shipped yet, and when it should arrive. Thanks.';

function loadInboundSettings() {
  const { rounds, connections } = loadSettings();
  return {
    seconds: envNumber('BENCH_MSGAPP_INBOUND_SECONDS', 10, 1),
    rateEvents: envInt('BENCH_MSGAPP_INBOUND_RATE_EVENTS', 500, 1),
    events: envInt('BENCH_MSGAPP_INBOUND_EVENTS', 500, 1),
    warmup: envInt('BENCH_MSGAPP_INBOUND_WARMUP', 20, 1),
    // The customers the messages come from in turn: a customer's first message opens its conversation, later ones find it.
    customers: envInt('BENCH_MSGAPP_INBOUND_CUSTOMERS', 1000, 1),
    timeoutSeconds: envNumber('BENCH_MSGAPP_INBOUND_TIMEOUT_SECONDS', 120, 1),
    rounds,
    concurrency: connections,
  };
}

// ---- Cloud API webhook bodies, one message or one status each, as the provider sends them.

const envelope = (value: Record<string, unknown>) =>
  JSON.stringify({
    object: 'whatsapp_business_account',
    entry: [{ id: '102290129340398', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: NUMBER.display.slice(1), phone_number_id: NUMBER.id }, ...value } }] }],
  });
const unix = () => String(Math.floor(Date.now() / 1000));
const inboundBody = (wamid: string, from: string, text: string) =>
  envelope({ contacts: [{ profile: { name: 'Bench Customer' }, wa_id: from }], messages: [{ from, id: wamid, timestamp: unix(), type: 'text', text: { body: text } }] });
const statusBody = (wamid: string, status: 'sent' | 'delivered' | 'read', recipient: string) =>
  envelope({ statuses: [{ id: wamid, status, timestamp: unix(), recipient_id: recipient, ...(status === 'read' ? {} : { pricing: { billable: false, pricing_model: 'PMP', type: 'free_customer_service', category: 'service' } }) }] });

// ---- The carrier: a process of its own POSTing to the webhook (the measuring process serves it).

/** `schedule`: each body at its offset (ms) from the start, whatever the answers (open loop); `lanes`: `concurrency` at a time. */
type CarrierRequest = { kind: 'schedule'; posts: Array<{ at: number; body: string }> } | { kind: 'lanes'; bodies: string[]; concurrency: number };
/** One POST: when it was due and started, when its answer ended (epoch ms), its status (0: no answer). */
type Ack = { due: number; start: number; end: number; status: number };

const carrierRole = () =>
  serveRole<CarrierRequest, Ack[]>(async () => {
    const url = new URL(process.env.BENCH_MSGAPP_INBOUND_URL!);
    const epoch = () => performance.timeOrigin + performance.now();
    const post = (agent: http.Agent, body: string, due: number) =>
      new Promise<Ack>((resolve) => {
        const start = epoch();
        const headers = { 'Content-Type': 'application/json', 'X-Hub-Signature-256': signHubPayload(body, APP_SECRET), 'User-Agent': 'facebookexternalua', 'Content-Length': String(Buffer.byteLength(body)) };
        const req = http.request({ method: 'POST', hostname: url.hostname, port: url.port, path: url.pathname, agent, headers });
        req.on('error', () => resolve({ due, start, end: epoch(), status: 0 }));
        req.on('response', (res) => res.resume().on('end', () => resolve({ due, start, end: epoch(), status: res.statusCode ?? 0 })));
        req.end(body);
      });
    const handle = async (r: CarrierRequest): Promise<Ack[]> => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: r.kind === 'lanes' ? r.concurrency : CARRIER_SOCKETS });
      try {
        if (r.kind === 'lanes') {
          const acks: Ack[] = new Array(r.bodies.length);
          await inLanes(r.bodies.length, r.concurrency, async (i) => void (acks[i] = await post(agent, r.bodies[i], epoch())));
          return acks;
        }
        // Every POST due by now goes out on each wake-up: the offered rate holds whatever the timer's granularity.
        const t0 = epoch() + 20;
        const sent: Array<Promise<Ack>> = [];
        while (sent.length < r.posts.length) {
          const wait = t0 + r.posts[sent.length].at - epoch();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          while (sent.length < r.posts.length && t0 + r.posts[sent.length].at <= epoch()) sent.push(post(agent, r.posts[sent.length].body, t0 + r.posts[sent.length].at));
        }
        return await Promise.all(sent);
      } finally {
        agent.destroy();
      }
    };
    return { handle };
  });

// ---- The subscriber: a process of its own (a customer's backend), HTTPS with the test certificate, 200 at once.

type SubscriberRequest = { kind: 'take' } | { kind: 'verify'; secret: string };
/** Receipts since the last take: message.inbound events by their text and plain POSTs by their id, with when (epoch ms). */
type SubscriberTake = { events: Array<[text: string, at: number]>; plain: Array<[id: string, at: number]>; duplicates: number };
/** Events whose signature does not verify with the subscription's secret, of all received. */
type SubscriberVerdict = { bad: number; checked: number };
type SubscriberAnswer = SubscriberTake | SubscriberVerdict;

const subscriberRole = () =>
  serveRole<SubscriberRequest, SubscriberAnswer>(async () => {
    const pki = JSON.parse(fs.readFileSync(process.env[PKI_FILE_ENV]!, 'utf8')) as TestPki;
    const epoch = () => performance.timeOrigin + performance.now();
    const seen = new Set<string>();
    const signed: Array<{ body: Buffer; signature: string }> = [];
    let events: SubscriberTake['events'] = [];
    let plain: SubscriberTake['plain'] = [];
    let duplicates = 0;
    const receiver = await startHttpsReceiver({
      pki,
      handler: (req, res) => {
        const at = epoch();
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        receiver.hits.length = 0; // its record of every request is not needed here
        const id = String(req.headers['x-concierge-delivery'] ?? '');
        if (!id.startsWith('dlv_')) return void plain.push([id, at]);
        const text = String((JSON.parse(req.rawBody.toString('utf8')) as { data?: { text?: unknown } }).data?.text ?? '');
        if (seen.has(text)) return void duplicates++;
        seen.add(text);
        events.push([text, at]);
        signed.push({ body: req.rawBody, signature: String(req.headers['x-concierge-signature'] ?? '') });
      },
    });
    const handle = async (r: SubscriberRequest): Promise<SubscriberAnswer> => {
      if (r.kind === 'take') {
        const got = { events, plain, duplicates };
        events = [];
        plain = [];
        return got;
      }
      let bad = 0;
      for (const { body, signature } of signed) {
        try {
          verifyWebhook(body, signature, r.secret);
        } catch {
          bad++;
        }
      }
      return { bad, checked: signed.length };
    };
    return { ready: { url: receiver.url, port: receiver.port }, handle, stop: () => receiver.close() };
  });

/** A check with an inclusive goal (`<=` or `>=`). */
const within = (name: string, value: number, unit: string, op: '<=' | '>=', limit: number): Check => ({ name, value, unit, goal: `${op} ${limit}`, pass: op === '<=' ? value <= limit : value >= limit });

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = loadInboundSettings();
  const epochToLocal = (at: number) => at - performance.timeOrigin;
  const customerNumber = (i: number) => `155530${String(i % s.customers).padStart(5, '0')}`;

  // ---- The subscriber: a process of its own (the customer's backend); each message.inbound's receipt by its text.
  const subscriber = await forkRole<SubscriberRequest, SubscriberAnswer, { url: string; port: number }>(__filename, 'subscriber', cleanup);
  const receipts = new Map<string, number>();
  const plainReceived = new Map<string, number>();
  let duplicates = 0;
  /** What the subscriber received since the last call, its times made this process's. */
  const sync = async () => {
    const got = (await subscriber.call({ kind: 'take' })) as SubscriberTake;
    for (const [text, at] of got.events) receipts.set(text, epochToLocal(at));
    for (const [id, at] of got.plain) plainReceived.set(id, epochToLocal(at));
    duplicates = got.duplicates;
  };
  const hookUrl = `${subscriber.ready.url}/hook`;

  // ---- As `npm start`: one composition (role both) and the outbox relay in a process of its own, delivering to loopback; the sandbox is the provider it would call.
  const bench = await setUpBench(cleanup);
  const numbers = [{ phoneNumberId: NUMBER.id, displayPhoneNumber: NUMBER.display, accessToken: 'bench-token' }];
  const sandbox = await startMsgappSandbox({ appSecret: APP_SECRET, numbers });
  cleanup.push(['msgapp sandbox', () => sandbox.close()]);
  const config = { MSGAPP_API_BASE: sandbox.url, MSGAPP_APP_SECRET: APP_SECRET, MSGAPP_VERIFY_TOKEN: 'bench-verify', CONCIERGE_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' };
  // The service's own time per transaction (the webhook batches what arrives together) and the batches' sizes,
  // beside the carrier's: a slow answer is slow work or a queue.
  const inService = { acceptMany: [] as number[], applyStatuses: [] as number[] };
  const batchSizes = { acceptMany: [] as number[], applyStatuses: [] as number[] };
  const instrument = (c: Composition) => {
    for (const method of ['acceptMany', 'applyStatuses'] as const) {
      const started = new Map<object, number>();
      around(c.services.providerEvents as Pick<typeof c.services.providerEvents, typeof method>, method, (items: unknown[]) => void started.set(items, now()), (_r, items: unknown[]) => {
        inService[method].push(now() - started.get(items)!);
        batchSizes[method].push(items.length);
        started.delete(items);
      });
    }
  };
  const { dev, api } = await benchStack(bench, { oneProcess: true, relayApart: true, config, instrument });
  const subscription = await api.c.services.subscriptions.create(bench.workspaceId, hookUrl, ['message.inbound']);
  const credentialId = (await api.c.services.credentials.create(bench.workspaceId, 'msgapp_access_token', 'bench number', 'bench-token')).id;
  // No sender action: the agent does not answer, so no agent turn runs and the subscriber path is measured alone.
  const { agentId } = await publishAgent(api, bench.workspaceId, {
    name: 'Bench msgapp inbox',
    instructions: 'Help customers with their orders.',
    triggers: { msgapp: { number: NUMBER.display, phone_number_id: NUMBER.id, credential_id: credentialId } },
    actions: [],
  });
  const webhookUrl = `${api.url}/webhooks/msgapp`;
  const carrier = await forkRole<CarrierRequest, Ack[]>(__filename, 'carrier', cleanup, { BENCH_MSGAPP_INBOUND_URL: webhookUrl });
  log(
    `  setup: as npm start, one composition (role both) at ${webhookUrl} and the outbox relay in a process of its own, Temporal dev server ${dev.address}, ` +
      `agent ${agentId} without a sender action (no agent turn), subscriber process ${hookUrl} (message.inbound), carrier process with ${CARRIER_SOCKETS} keep-alive connections, messages from ${s.customers} customers in turn`,
  );

  // ---- Messages: a unique text each, from the customers in turn.
  let next = 0;
  const newMessages = (tag: string, n: number) =>
    Array.from({ length: n }, () => {
      const i = next++;
      return { wamid: newWamid(), text: `[${tag} ${i}] ${TEXT}`, body: '', from: customerNumber(i) };
    }).map((m) => ({ ...m, body: inboundBody(m.wamid, m.from, m.text) }));
  type Msg = ReturnType<typeof newMessages>[number];
  const received = (msgs: Msg[]) => msgs.filter((m) => receipts.has(m.text)).length;
  const db = bench.db.orm.em.fork();
  /** Every message's event received, and nothing left for the relay (inbound hand-offs, deliveries): the next phase starts clean. */
  async function settle(msgs: Msg[], what: string): Promise<void> {
    await waitFor(async () => (await sync(), received(msgs) === msgs.length), s.timeoutSeconds * 1000, () => `${what}: ${received(msgs)} of ${msgs.length} message.inbound events received`);
    const pending = async () => {
      const [{ n }] = await db.execute<Array<{ n: string }>>(
        `select (select count(*) from msgapp_inbound_events where dispatched_at is null) + (select count(*) from webhook_deliveries where status <> 'delivered') as n`,
      );
      return Number(n);
    };
    await waitFor(async () => (await pending()) === 0, s.timeoutSeconds * 1000, () => `${what}: the relay still has work`, 50);
  }
  const non200 = (acks: Ack[]) => acks.filter((a) => a.status !== 200).length;
  const statusCounts = (acks: Ack[]) => acks.reduce<Record<string, number>>((c, a) => ({ ...c, [String(a.status)]: (c[String(a.status)] ?? 0) + 1 }), {});
  /** POST start -> receipt of each message's event (ms), in the order of `msgs`. */
  const toReceipt = (msgs: Msg[], acks: Ack[]) => msgs.map((m, i) => receipts.get(m.text)! - epochToLocal(acks[i].start));
  /** Messages whose provider id does not have exactly one row in `messages`. */
  async function notStoredOnce(wamids: string[]): Promise<number> {
    const rows = await db.execute<Array<{ n: string }>>('select count(*) as n from messages where provider_message_id in (?) group by provider_message_id having count(*) = 1', [wamids]);
    return wamids.length - rows.length;
  }

  // ---- Warm-up (excluded): the first customers' conversations, connections, JIT.
  const warm = newMessages('warm', s.warmup);
  const warmAcks = await carrier.call({ kind: 'lanes', bodies: warm.map((m) => m.body), concurrency: Math.min(s.concurrency, s.warmup) });
  if (non200(warmAcks)) throw new Error(`warm-up: the webhook answered ${JSON.stringify(statusCounts(warmAcks))}`);
  await settle(warm, 'warm-up');
  log(`  warm-up: ${s.warmup} messages, webhook ${p50p99(spread(warmAcks.map((a) => a.end - a.start)))}`);

  // ---- (A) Outbound messages of the agent for the statuses to find: the agent's replies in the warm-up conversations, in turn.
  const parties = await db.execute<Array<{ conversation_id: string; customer_id: string; from_number: string }>>(
    'select conversation_id, customer_id, from_number from messages where provider_message_id in (?)',
    [warm.map((m) => m.wamid)],
  );
  const outbound = Array.from({ length: Math.ceil((STATUSES_PER_SEC * s.seconds) / 3) }, (_, i) => ({ id: `msg_bench${randomBytes(8).toString('hex')}`, wamid: newWamid(), party: parties[i % parties.length] }));
  for (let k = 0; k < outbound.length; k += 500) {
    const batch = outbound.slice(k, k + 500);
    // raw SQL: the bench stands in for the send workflow, which recorded these and had them accepted ('sent').
    await db.execute(
      `insert into messages (id, workspace_id, conversation_id, customer_id, agent_id, direction, source, channel, from_number, to_number, kind, text, content, status, provider_message_id)
       values ${batch.map(() => `(?, ?, ?, ?, ?, 'outbound', 'agent', 'msgapp', ?, ?, 'text', 'Your order shipped yesterday.', '{}'::jsonb, 'sent', ?)`).join(', ')}`,
      batch.flatMap((m) => [m.id, bench.workspaceId, m.party.conversation_id, m.party.customer_id, agentId, NUMBER.display, m.party.from_number, m.wamid]),
    );
  }

  // ---- (A) The carrier's load on schedule: per second, 100 messages and sent, delivered, read for 100 outbound messages.
  const loadMsgs = newMessages('load', Math.round(INBOUND_PER_SEC * s.seconds));
  const statuses = outbound.flatMap((_, k) => (['sent', 'delivered', 'read'] as const).map((st) => ({ k, st })));
  // Within each second's block of 100 outbound messages: all their sent, then delivered, then read.
  const block = (x: { k: number; st: string }) => Math.floor(x.k / 100) * 3 + ['sent', 'delivered', 'read'].indexOf(x.st);
  statuses.sort((a, b) => block(a) - block(b) || a.k - b.k);
  const statusPosts = statuses.slice(0, Math.round(STATUSES_PER_SEC * s.seconds)).map(({ k, st }) => statusBody(outbound[k].wamid, st, outbound[k].party.from_number.replace(/^\+/, '')));
  const kinds: Array<'inbound' | 'status'> = [];
  const posts: Array<{ at: number; body: string }> = [];
  const step = 1000 / (INBOUND_PER_SEC + STATUSES_PER_SEC);
  for (let i = 0, m = 0, st = 0; m < loadMsgs.length || st < statusPosts.length; i++) {
    const inbound = (i % 4 === 0 && m < loadMsgs.length) || st >= statusPosts.length;
    kinds.push(inbound ? 'inbound' : 'status');
    posts.push({ at: i * step, body: inbound ? loadMsgs[m++].body : statusPosts[st++] });
  }
  log(`  (A) offering ${INBOUND_PER_SEC} messages/s + ${STATUSES_PER_SEC} statuses/s for ${s.seconds} s (${posts.length} POSTs on schedule, one item each)...`);
  const resetInService = () => [...Object.values(inService), ...Object.values(batchSizes)].forEach((xs) => (xs.length = 0));
  const batchLine = (method: keyof typeof inService) =>
    `${method} ${p50p99(spread(inService[method]))} per transaction, ${inService[method].length} transactions of ${mean(batchSizes[method]).toFixed(1)} on average (largest ${Math.max(...batchSizes[method])})`;
  const inServiceLine = () => `in the service: ${batchLine('acceptMany')}` + (inService.applyStatuses.length ? `; ${batchLine('applyStatuses')}` : '');
  resetInService();
  const loadAcks = await carrier.call({ kind: 'schedule', posts });
  const loadInService = inServiceLine();
  const byKind = (kind: 'inbound' | 'status') => loadAcks.filter((_, i) => kinds[i] === kind);
  const t0 = Math.min(...loadAcks.map((a) => a.due));
  const ackRun = (kind: 'inbound' | 'status', target: string) => {
    const acks = byKind(kind);
    const ok = acks.filter((a) => a.status === 200);
    // Acknowledged per second over the offered window, or longer if the last answers came after it: keeping up is the offered rate.
    const window = Math.max(s.seconds, (Math.max(...acks.map((a) => a.end)) - t0) / 1000);
    return runStats(target, 1, window, ok.length, acks.map((a) => a.end - a.due), CARRIER_SOCKETS, statusCounts(acks));
  };
  const inboundAck = ackRun('inbound', 'inbound ack');
  const statusAck = ackRun('status', 'status ack');
  const failed = non200(loadAcks);
  await settle(loadMsgs, '(A)');
  const notOnce = await notStoredOnce(loadMsgs.map((m) => m.wamid));
  const [{ n: unapplied }] = await db.execute<Array<{ n: string }>>(
    `select count(*) as n from messages where provider_message_id in (?) and (status <> 'read' or jsonb_array_length(status_history) <> 3)`,
    [outbound.slice(0, Math.ceil(statusPosts.length / 3)).map((m) => m.wamid)],
  );
  const loadReceipt = spread(toReceipt(loadMsgs, byKind('inbound')));
  for (const r of [inboundAck, statusAck]) {
    log(`    ${r.target.padEnd(12)} ${r.requestsPerSec.toFixed(1).padStart(6)}/s acknowledged  latency from due: p50 ${ms(r.latencyP50Ms)} ms, p99 ${ms(r.latencyP99Ms)} ms  ${JSON.stringify(r.statusCodes)}`);
  }
  log(`    ${loadInService}`);
  log(`    message -> subscriber under this load: ${p50p99(loadReceipt)} (informational); not stored once: ${notOnce}; outbound messages not at read with 3 statuses: ${unapplied}`);

  // ---- (B1) 100 messages/s on schedule: POST start -> the subscriber's receipt of its message.inbound.
  const rateMsgs = newMessages('rate', s.rateEvents);
  resetInService();
  const rateAcks = await carrier.call({ kind: 'schedule', posts: rateMsgs.map((m, i) => ({ at: (i * 1000) / INBOUND_PER_SEC, body: m.body })) });
  if (non200(rateAcks)) throw new Error(`(B1): the webhook answered ${JSON.stringify(statusCounts(rateAcks))}`);
  await settle(rateMsgs, '(B1)');
  const rateReceipt = spread(toReceipt(rateMsgs, rateAcks));
  const rateAck = spread(rateAcks.map((a) => a.end - a.due));
  log(`  (B1) steady ${INBOUND_PER_SEC} messages/s (${s.rateEvents}): POST start -> subscriber ${p50p99(rateReceipt)} (goal p99 < ${RECEIPT_P99_GOAL_MS} ms); webhook ack ${p50p99(rateAck)}, ${inServiceLine()}`);

  // ---- (B2) Full speed, `concurrency` connections: N messages' POSTs -> their events at the subscriber, against plain POSTs to it.
  async function subjectRun(round: number): Promise<RunStats> {
    const msgs = newMessages(`e2e${round}`, s.events);
    const acks = await carrier.call({ kind: 'lanes', bodies: msgs.map((m) => m.body), concurrency: s.concurrency });
    if (non200(acks)) throw new Error(`(B2) round ${round}: the webhook answered ${JSON.stringify(statusCounts(acks))}`);
    await settle(msgs, `(B2) round ${round}`);
    const seconds = (Math.max(...msgs.map((m) => receipts.get(m.text)!)) - Math.min(...acks.map((a) => epochToLocal(a.start)))) / 1000;
    return runStats('msgapp-inbound', round, seconds, s.events, toReceipt(msgs, acks), s.concurrency, { '200': s.events });
  }
  // The baseline, as webhook-fanout's `plain`: a similar signed body straight to the subscriber, a fresh TLS connection per POST.
  async function plainRun(round: number): Promise<RunStats> {
    const tag = `plain_${round}_${randomBytes(3).toString('hex')}`;
    const starts = new Map<string, number>();
    await inLanes(s.events, s.concurrency, (i) =>
      new Promise<void>((resolve, reject) => {
        const id = `${tag}_${i}`;
        starts.set(id, now());
        const data = { message_id: `msg_${id}`, channel: 'msgapp', from: `+${customerNumber(i)}`, to: NUMBER.display, text: `[${id}] ${TEXT}`, profile_name: 'Bench Customer', received_at: new Date().toISOString() };
        const body = Buffer.from(JSON.stringify({ id: `evt_${id}`, event: 'message.inbound', created_at: new Date().toISOString(), data }));
        const headers = { 'Content-Type': 'application/json', 'X-Concierge-Signature': signatureHeader(subscription.secret, body, Math.floor(Date.now() / 1000)), 'X-Concierge-Event': 'message.inbound', 'X-Concierge-Delivery': id, 'User-Agent': USER_AGENT, 'Content-Length': String(body.length) };
        const req = https.request({ method: 'POST', hostname: '127.0.0.1', port: subscriber.ready.port, path: '/hook', agent: false, headers });
        req.on('error', reject);
        req.on('response', (res) => res.resume().on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`plain POST answered ${res.statusCode}`)))));
        req.end(body);
      }),
    );
    const ids = [...starts.keys()];
    await sync();
    if (ids.some((id) => !plainReceived.has(id))) throw new Error('plain: POSTs answered but not recorded by the receiver');
    const seconds = (Math.max(...ids.map((id) => plainReceived.get(id)!)) - Math.min(...starts.values())) / 1000;
    const latencies = ids.map((id) => plainReceived.get(id)! - starts.get(id)!);
    for (const id of ids) plainReceived.delete(id);
    return runStats('plain', round, seconds, s.events, latencies, s.concurrency, { '200': s.events });
  }
  const runs: RunStats[] = [inboundAck, statusAck];
  const record = (r: RunStats, unit: string) => {
    runs.push(r);
    log(`  ${r.target.padEnd(16)} round ${r.round}  ${r.requestsPerSec.toFixed(0).padStart(6)} ${unit.padEnd(11)} p50 ${ms(r.latencyP50Ms).padStart(6)} ms  p99 ${ms(r.latencyP99Ms).padStart(6)} ms  (${r.totalRequests} in ${r.durationSeconds.toFixed(2)} s)`);
    return r;
  };
  // Order: plain, subject, plain, ..., plain; each subject round against the mean of the plain runs around it.
  const plains = [record(await plainRun(1), 'posts/s')];
  const subjects: RunStats[] = [];
  for (let round = 1; round <= s.rounds; round++) {
    subjects.push(record(await subjectRun(round), 'events/s'));
    plains.push(record(await plainRun(round + 1), 'posts/s'));
  }

  // ---- Every event delivered once, signed with the subscription's secret.
  await sync();
  const signatures = (await subscriber.call({ kind: 'verify', secret: subscription.secret })) as SubscriberVerdict;
  if (signatures.bad) throw new Error(`${signatures.bad} of ${signatures.checked} message.inbound events were not signed with the subscription's secret`);
  if (duplicates) throw new Error(`the subscriber got ${duplicates} duplicate message.inbound events`);

  // ---- Figures.
  const [subjectSummary, plainSummary] = ['msgapp-inbound', 'plain'].map((t) => summarizeTarget(runs, t));
  const roundRatios = subjects.map((r, k) => r.requestsPerSec / mean([plains[k].requestsPerSec, plains[k + 1].requestsPerSec]));
  const comparison = compare(
    { name: 'msgapp-inbound', subject: 'msgapp-inbound', baseline: 'plain', subjectUnit: 'events/s', baselineUnit: 'posts/s' },
    { subject: subjectSummary.meanRequestsPerSec, baseline: plainSummary.meanRequestsPerSec, target: TARGET_RATIO, best: subjectSummary.bestRequestsPerSec / plainSummary.bestRequestsPerSec, rounds: roundRatios },
  );
  const exact = (name: string, value: number): Check => ({ name, value, unit: 'items', goal: '= 0', pass: value === 0 });
  const checks: Check[] = [
    within(`msgapp-inbound inbound messages acknowledged (offered ${INBOUND_PER_SEC}/s)`, inboundAck.requestsPerSec, '/s', '>=', INBOUND_PER_SEC),
    within(`msgapp-inbound statuses acknowledged (offered ${STATUSES_PER_SEC}/s)`, statusAck.requestsPerSec, '/s', '>=', STATUSES_PER_SEC),
    within('msgapp-inbound inbound ack p99 under carrier load', inboundAck.latencyP99Ms, 'ms', '<=', ACK_P99_GOAL_MS),
    within('msgapp-inbound status ack p99 under carrier load', statusAck.latencyP99Ms, 'ms', '<=', ACK_P99_GOAL_MS),
    exact('msgapp-inbound webhook answers other than 200 under carrier load', failed),
    exact('msgapp-inbound messages not stored exactly once', notOnce),
    exact('msgapp-inbound outbound messages without their 3 statuses applied', Number(unapplied)),
    below(`msgapp-inbound POST -> subscriber p99 at ${INBOUND_PER_SEC} messages/s`, rateReceipt.p99, 'ms', RECEIPT_P99_GOAL_MS),
  ];
  const headlines = [
    `msgapp-inbound carrier load: ${inboundAck.requestsPerSec.toFixed(1)} messages/s and ${statusAck.requestsPerSec.toFixed(1)} statuses/s acknowledged ` +
      `(offered ${INBOUND_PER_SEC} + ${STATUSES_PER_SEC}); ack messages p50 ${ms(inboundAck.latencyP50Ms)} / p99 ${ms(inboundAck.latencyP99Ms)} ms, ` +
      `statuses p50 ${ms(statusAck.latencyP50Ms)} / p99 ${ms(statusAck.latencyP99Ms)} ms`,
    `msgapp-inbound at ${INBOUND_PER_SEC} messages/s: POST start -> subscriber ${p50p99(rateReceipt)}`,
    `msgapp-inbound full speed (${s.concurrency} connections): ${subjectSummary.meanRequestsPerSec.toFixed(0)} events/s end to end vs plain ${plainSummary.meanRequestsPerSec.toFixed(0)} posts/s = ratio ${comparison.ratio.toFixed(2)}`,
  ];
  const figures: Record<string, Spread> = { loadReceipt, rateReceipt, rateAck };
  return {
    section: 'msgapp-inbound',
    description:
      `msgapp webhook (as npm start: one composition and the relay apart; agent without a sender action: the subscriber path alone) under ${INBOUND_PER_SEC} messages/s + ${STATUSES_PER_SEC} statuses/s; ` +
      `message -> message.inbound at a local HTTPS subscriber at ${INBOUND_PER_SEC}/s and at full speed vs plain signed HTTPS POSTs to it`,
    settings: { ...s, inboundPerSec: INBOUND_PER_SEC, statusesPerSec: STATUSES_PER_SEC, carrierSockets: CARRIER_SOCKETS, loadAverage: os.loadavg().map((x) => Math.round(x * 10) / 10) },
    runs,
    targets: [summarizeTarget(runs, 'inbound ack'), summarizeTarget(runs, 'status ack'), subjectSummary, plainSummary],
    comparisons: [comparison],
    checks,
    headlines,
    details: { latencyMs: figures, nonOkAnswers: failed, notStoredOnce: notOnce, statusesNotApplied: Number(unapplied) },
  };
}

const inChild = section(module, 'msgapp-inbound', measure, { roles: { carrier: carrierRole, subscriber: subscriberRole } });

/** The subscriber path of inbound msgapp messages under a carrier's load (issue 33). */
export async function benchMsgappInbound(log: (line: string) => void = console.log): Promise<Result> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-bench-pki-'));
  try {
    const pki = createTestPki();
    const pkiFile = path.join(dir, 'pki.json');
    fs.writeFileSync(pkiFile, JSON.stringify(pki), { mode: 0o600 });
    fs.writeFileSync(path.join(dir, 'ca.pem'), pki.ca);
    // NODE_EXTRA_CA_CERTS is read once at process start: the child's sender trusts the test CA as production trusts its CAs.
    return await inChild(log, { env: { [PKI_FILE_ENV]: pkiFile, NODE_EXTRA_CA_CERTS: path.join(dir, 'ca.pem'), LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' } });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
