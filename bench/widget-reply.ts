// What this measures and how to read it: docs/benchmarks.md#widget-reply
import { section, type Cleanup } from './lib/child';
import { envInt, envNumber } from './lib/load';
import { benchEmbedder, benchLlm, benchStack, createKey, setUpBench } from './lib/setup';
import { alternate, below, ms, now, overhead, p50p99, round1, sequentialRun, spread, summarizeTarget, waitFor, type Spread } from './lib/stats';
import type { Result } from './lib/types';
import { createWidgetSite, initConversation, openReplySocket, WIDGET_ORIGIN } from './lib/widget';

/** The shop's knowledge base: each sample's question retrieves from it. */
const KNOWLEDGE: Array<[string, string]> = [
  ['shipping.md', '# Shipping\n\nOrders ship within two working days. Standard delivery takes three to five days; express delivery arrives the next working day when ordered before 2 pm.'],
  ['returns.md', '# Returns\n\nUnworn items can be returned within 30 days of delivery for a full refund. Start a return from your account page; the return label is free.'],
  ['opening-hours.md', '# Opening hours\n\nOur shop is open Monday to Saturday from nine to six. Customer service answers by chat every day from eight to eight.'],
];

/** Issue 33's goals for the overhead to the first reply_delta. */
const GOAL_OVERHEAD_P50_MS = 25;
const GOAL_OVERHEAD_P99_MS = 60;
const INSTRUCTIONS = 'Help shoppers with their orders.';
/** The fake model's answer to everything: 64 characters, 8 fragments of 8. */
const REPLY_TEXT = 'Your order shipped yesterday and should arrive within two days.';
const CHUNK_CHARS = 8;
/** A reply that has not ended this long after its send fails the section. */
const REPLY_TIMEOUT_MS = 30_000;

const settings = () => ({
  sends: envInt('BENCH_WIDGET_SENDS', 200, 1), warmupSends: envInt('BENCH_WIDGET_WARMUP_SENDS', 20, 0), conversations: envInt('BENCH_WIDGET_CONVERSATIONS', 5, 1),
  llmDelayMs: envNumber('BENCH_WIDGET_LLM_DELAY_MS', 50, 0), llmChunkMs: envNumber('BENCH_WIDGET_LLM_CHUNK_MS', 5, 0),
});

/** First-fragment and end times of the replies seen on any socket, by reply_id. */
class ReplyClock {
  private readonly seen = new Map<string, { delta?: number; final?: number; text?: string; error?: string }>();

  onFrame(frame: Record<string, unknown>, at: number): void {
    if (typeof frame.reply_id !== 'string') return;
    const entry = this.seen.get(frame.reply_id) ?? {};
    this.seen.set(frame.reply_id, entry);
    if (frame.type === 'reply_delta') entry.delta ??= at;
    else if (frame.type === 'reply') {
      entry.final ??= at;
      entry.text = String(frame.text);
    } else if (frame.type === 'error') entry.error = `${String(frame.code)}: ${String(frame.text)}`;
  }

  /** Resolves once the reply has ended on the socket (a first delta having come before it); arrival times are the frames'. */
  async ended(replyId: string): Promise<{ delta: number; final: number; text: string }> {
    const ended = () => {
      const e = this.seen.get(replyId);
      if (e?.error) throw new Error(`reply ${replyId} failed: ${e.error}`);
      return e?.final !== undefined;
    };
    await waitFor(ended, REPLY_TIMEOUT_MS, () => `reply ${replyId} did not end on the socket`, 1);
    const e = this.seen.get(replyId)!;
    this.seen.delete(replyId);
    if (e.delta === undefined) throw new Error(`reply ${replyId} ended without a reply_delta first`);
    return { delta: e.delta, final: e.final!, text: e.text ?? '' };
  }
}

/** Milliseconds from the send (or the direct call) to: the first fragment, the end of the reply, the model seeing the request, the 202 (subject only). */
type Sample = { firstDelta: number; final: number; modelRequest: number; accepted?: number };

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = settings();
  const bench = await setUpBench(cleanup);

  // ---- The fake model (when each request arrived, by its last user message: unique per sample).
  const llm = await benchLlm(bench, REPLY_TEXT, { firstByteDelayMs: s.llmDelayMs, chunkDelayMs: s.llmChunkMs, chunkChars: CHUNK_CHARS });

  // ---- The embedding model the turn's retrieval uses, loaded up front; a worker whose turns call the fake model; the API.
  const embedder = benchEmbedder(bench);
  await embedder.load();
  // As `npm start` runs it (the figures are through it): one composition, role both, the relay apart.
  const oneProcess = process.env.BENCH_WIDGET_SPLIT !== '1';
  const { dev, api } = await benchStack(bench, {
    oneProcess,
    relayApart: oneProcess,
    overrides: { embedder: async () => embedder, services: { llm: llm.settings } },
    apiOverrides: { embedder: async () => embedder },
  });
  // A small knowledge base, so each turn retrieves (embeds its query, searches) as an agent with one does.
  const { key } = await createKey(api.c.services, bench.workspaceId, ['kb:write']);
  const kbFiles: string[] = [];
  for (const [name, text] of KNOWLEDGE) {
    const form = new FormData();
    form.append('file', new Blob([text], { type: 'text/markdown' }), name);
    const res = await fetch(`${api.url}/api/v1/kb/files`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
    if (res.status !== 201) throw new Error(`upload of ${name} answered ${res.status}: ${await res.text()}`);
    kbFiles.push(((await res.json()) as { id: string }).id);
  }
  const db = bench.db.orm.em.fork();
  await waitFor(
    async () => (await db.execute<Array<{ n: string }>>(`select count(*) as n from kb_files where id in (?) and status = 'active'`, [kbFiles]))[0].n === String(kbFiles.length),
    120_000,
    () => 'the knowledge base still indexing',
    100,
  );
  const { siteId } = await createWidgetSite(api, bench.workspaceId, INSTRUCTIONS);
  const clock = new ReplyClock();
  const conversations: string[] = [];
  for (let i = 0; i < s.conversations; i++) {
    const id = await initConversation(api, siteId);
    await openReplySocket(api, siteId, id, (frame, at) => clock.onFrame(frame, at), cleanup);
    conversations.push(id);
  }
  log(
    `  setup: API ${api.url} with a ChatHub, Temporal dev server ${dev.address} (SQLite file), ${oneProcess ? 'one composition as npm start (role both, the relay apart)' : 'an API and a worker composition (BENCH_WIDGET_SPLIT=1)'}, ` +
      `fake model ${llm.url} (first byte after ${s.llmDelayMs} ms, ${s.llmChunkMs} ms between events), ${s.conversations} conversations with open sockets`,
  );

  // ---- The two sides. Each sample's user text is unique, so the model's request can be matched to it.
  const headers = { 'x-concierge-site': siteId, origin: WIDGET_ORIGIN, 'content-type': 'application/json' };
  let n = 0;
  const modelSaw = (text: string) => {
    const arrived = llm.saw(text);
    if (arrived === undefined) throw new Error(`the model never saw the request for '${text}'`);
    return arrived;
  };
  const subject = async (): Promise<Sample> => {
    const i = n++;
    const text = `q${i} where is my order?`;
    const t0 = now();
    const res = await fetch(`${api.url}/api/public/widget/send`, { method: 'POST', headers, body: JSON.stringify({ conversation_id: conversations[i % conversations.length], text, delivery: 'async' }) });
    const accepted = now() - t0;
    const body = (await res.json()) as { reply_id?: string };
    if (res.status !== 202 || !body.reply_id) throw new Error(`POST /api/public/widget/send answered ${res.status}: ${JSON.stringify(body)}`);
    const r = await clock.ended(body.reply_id);
    if (r.text !== REPLY_TEXT) throw new Error(`reply ${body.reply_id} was ${JSON.stringify(r.text)}, expected the model's text`);
    return { firstDelta: r.delta - t0, final: r.final - t0, modelRequest: modelSaw(text) - t0, accepted };
  };
  const baseline = async (): Promise<Sample> => {
    const text = `b${n++} where is my order?`;
    let first: number | undefined;
    const t0 = now();
    const out = await llm.model.complete({ messages: [{ role: 'system', content: INSTRUCTIONS }, { role: 'user', content: text }] }, () => {
      first ??= now();
    });
    const end = now();
    if (out.text !== REPLY_TEXT || first === undefined) throw new Error(`the direct call returned ${JSON.stringify(out.text)}${first === undefined ? ' with no fragment' : ''}`);
    return { firstDelta: first - t0, final: end - t0, modelRequest: modelSaw(text) - t0 };
  };
  const pairs = (count: number) => alternate(count, subject, baseline);

  // ---- Warm-up: the first workflow starts and activity runs, model and connection pools, JIT.
  if (s.warmupSends > 0) {
    const t0 = now();
    await pairs(s.warmupSends);
    log(`  warm-up: ${s.warmupSends} samples per side in ${((now() - t0) / 1000).toFixed(1)} s`);
  }

  const t0 = now();
  const { subject: sub, baseline: base } = await pairs(s.sends);
  const seconds = (now() - t0) / 1000;

  const pick = (xs: Sample[], k: keyof Sample) => xs.map((x) => x[k] ?? NaN);
  const delta = overhead(pick(sub, 'firstDelta'), pick(base, 'firstDelta'));
  const final = overhead(pick(sub, 'final'), pick(base, 'final'));
  const requestToDelta = (xs: Sample[]) => spread(xs.map((x) => x.firstDelta - x.modelRequest));
  const figures: Record<string, Spread> = {
    subjectFirstDelta: delta.subject, subjectFinal: final.subject, subjectAccepted: spread(pick(sub, 'accepted')), subjectToModelRequest: spread(pick(sub, 'modelRequest')),
    subjectModelRequestToFirstDelta: requestToDelta(sub), baselineFirstDelta: delta.baseline, baselineFinal: final.baseline,
    baselineModelRequestToFirstDelta: requestToDelta(base), overheadFirstDelta: delta.overhead, overheadFinal: final.overhead,
  };
  const f = figures;
  // Sequential: req/s = replies a second one client gets, each to its end; latency: to the first fragment.
  const run = (target: string, xs: Sample[], status: string) => sequentialRun(target, pick(xs, 'firstDelta'), { [status]: xs.length }, undefined, pick(xs, 'final'));
  const runs = [run('widget async send', sub, '202'), run('model direct', base, 'ok')];
  const targets = runs.map((r) => summarizeTarget(runs, r.target));
  const checks = [
    below('widget-reply overhead to first reply_delta p50', delta.overhead.p50, 'ms', GOAL_OVERHEAD_P50_MS),
    below('widget-reply overhead to first reply_delta p99', delta.overhead.p99, 'ms', GOAL_OVERHEAD_P99_MS),
  ];
  const headlines = [
    `widget-reply: send → first reply_delta ${p50p99(delta.subject)} / model's own first delta ${p50p99(delta.baseline)} ` +
      `→ overhead ${p50p99(delta.overhead)} (${s.sends} sequential sends, model first byte after ${s.llmDelayMs} ms)`,
    `widget-reply: 202 accepted ${p50p99(f.subjectAccepted)}; send → final reply ${p50p99(final.subject)} / model's whole reply p50 ${ms(final.baseline.p50)} ms → overhead ${p50p99(final.overhead)}`,
    `widget-reply stages (p50): send → model request ${ms(f.subjectToModelRequest.p50)} ms; ` +
      `model request → first delta on the socket ${ms(f.subjectModelRequestToFirstDelta.p50)} ms vs ${ms(f.baselineModelRequestToFirstDelta.p50)} ms directly`,
  ];

  return {
    section: 'widget-reply',
    description: `${s.sends} sequential async widget sends timed to the first reply_delta on the socket, against the same fake model called directly; req/s = 1000 / mean time to the end of the reply`,
    settings: { ...s, seconds: round1(seconds), order: 'subject and baseline samples alternate one for one' },
    runs,
    targets,
    checks,
    headlines,
    details: { latencyMs: figures },
  };
}

// The turn's logger (services) would print a line per warning; the figures are what counts here.
export const benchWidgetReply = section(module, 'widget-reply', measure, { env: { LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' } });
