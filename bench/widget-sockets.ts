// What this measures and how to read it: docs/benchmarks.md#widget-sockets
import type { EntityManager } from '@mikro-orm/postgresql';
import { ChatFrames, type ChatNotice } from '../domain/chat/frames';
import { section, type Cleanup } from './lib/child';
import { envInt, envNumber, loadSettings } from './lib/load';
import { benchApi, benchCompose, listenOn, setUpBench, type BenchApi } from './lib/setup';
import { compareTargets, now, percentile, round1, runStats, spread, summarizeTarget } from './lib/stats';
import type { Check, Result, RunStats } from './lib/types';
import { createWidgetSite, initConversation, openReplySocket } from './lib/widget';

const TARGET_RATIO = 0;
const BUS_CHANNEL = 'bench_frames';
const ROUND_TRIP_CHANNEL = 'bench_round_trip';

const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

function settings() {
  const s = {
    sockets: envInt('BENCH_WIDGET_SOCKETS', 200, 1), frames: envInt('BENCH_WIDGET_FRAMES', 20, 1), apps: envInt('BENCH_WIDGET_SOCKET_APPS', 2, 1),
    publishers: envInt('BENCH_WIDGET_PUBLISHERS', 10, 1), drainMs: envNumber('BENCH_WIDGET_DRAIN_MS', 5_000, 100), rounds: loadSettings().rounds,
  };
  if (s.apps > s.sockets) throw new Error(`BENCH_WIDGET_SOCKET_APPS=${s.apps}: more apps than sockets (${s.sockets})`);
  return s;
}

/** A frame's text: its sequence number and send time (performance.now(), this process). */
const frameText = (seq: number, sentAt: number) => `${seq} ${sentAt.toFixed(3)}`;

/** What one side of one round received, per conversation. */
class Receipts {
  readonly seqs: number[][];
  readonly latenciesMs: number[] = [];
  lastAt = 0;

  constructor(conversations: number) {
    this.seqs = Array.from({ length: conversations }, () => []);
  }

  get received() { return this.latenciesMs.length; }

  add(conversation: number, text: string, at: number): void {
    const [seq, sentAt] = text.split(' ').map(Number);
    this.seqs[conversation].push(seq);
    this.latenciesMs.push(at - sentAt);
    this.lastAt = Math.max(this.lastAt, at);
  }

  /** Conversations whose frames arrived in strictly increasing order (none twice). */
  inOrder(): number {
    return this.seqs.filter((xs) => xs.every((x, i) => i === 0 || x > xs[i - 1])).length;
  }
}

/** One side of one round: latency publish -> arrival, seconds from the first publish to the last arrival. */
type Burst = { sent: number; received: number; inOrder: number; latenciesMs: number[]; seconds: number; framesPerSec: number };

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = settings();
  const bench = await setUpBench(cleanup);
  // The publisher: a pool of its own, as a worker process has. The API apps: one composition each, as separate API processes.
  const publisher: EntityManager = (await benchCompose(bench, 'cli')).em;
  const apis: BenchApi[] = [];
  for (let a = 0; a < s.apps; a++) apis.push(await benchApi(bench));
  const { siteId } = await createWidgetSite(apis[0], bench.workspaceId, 'Help shoppers.');

  // ---- Conversations and their sockets; each frame is kept for the round it belongs to.
  let current: { replyId: string; receipts: Receipts } | null = null;
  const conversations: string[] = [];
  for (let i = 0; i < s.sockets; i++) conversations.push(await initConversation(apis[0], siteId));
  const index = new Map(conversations.map((c, i) => [c, i]));
  let t = now();
  const strays: string[] = [];
  const onFrame = (i: number) => (frame: Record<string, unknown>, at: number) => {
    if (frame.type === 'reply_delta' && current && frame.reply_id === current.replyId) current.receipts.add(i, String(frame.text), at);
    // Every socket is told the hand-off state first (api/chat-hub.ts): expected, not a stray.
    else if (frame.type !== 'ping' && frame.type !== 'handoff') strays.push(JSON.stringify(frame).slice(0, 200));
  };
  await Promise.all(conversations.map((c, i) => openReplySocket(apis[i % apis.length], siteId, c, onFrame(i), cleanup)));
  const openMs = now() - t;
  const held = apis.map((a) => a.chatHub.size);
  if (held.reduce((x, y) => x + y, 0) !== s.sockets) throw new Error(`the hubs hold ${held.join(' + ')} sockets, expected ${s.sockets}`);
  log(`  setup: ${s.apps} API app(s) with a ChatHub each, holding ${held.join(' + ')} sockets (opened in ${ms(openMs)} ms); publisher pool of 10; ${s.publishers} publishes in flight`);

  // ---- The same-load bus baseline's listener: one plain connection.
  await listenOn(bench, BUS_CHANNEL, (payload, at) => {
    if (!current) return;
    const notice = JSON.parse(payload) as Extract<ChatNotice, { k: 'frame' }>;
    const i = index.get(notice.c);
    if (i === undefined || notice.f.type !== 'reply_delta' || notice.f.reply_id !== current.replyId) return;
    current.receipts.add(i, notice.f.text, at);
  });

  /** Publishes `frames` per conversation (P lanes, each owning conversations i ≡ lane mod P) and waits for them to arrive. */
  const burst = async (side: 'hub' | 'bus', label: string, frames: number): Promise<Burst> => {
    const replyId = `msg_bench${label}`;
    const receipts = new Receipts(conversations.length);
    current = { replyId, receipts };
    const publish =
      side === 'hub'
        ? (c: string, text: string) => new ChatFrames(publisher).publish(c, { type: 'reply_delta', reply_id: replyId, text })
        : async (c: string, text: string) => {
            const notice: ChatNotice = { k: 'frame', c, f: { type: 'reply_delta', reply_id: replyId, text } };
            await publisher.getConnection().execute('select pg_notify(?, ?)', [BUS_CHANNEL, JSON.stringify(notice)]);
          };
    const lanes = Math.min(s.publishers, conversations.length);
    const started = now();
    await Promise.all(
      Array.from({ length: lanes }, async (_, lane) => {
        const mine = conversations.filter((_c, i) => i % lanes === lane);
        for (let seq = 0; seq < frames; seq++) {
          for (const c of mine) await publish(c, frameText(seq, now()));
        }
      }),
    );
    const sent = frames * conversations.length;
    // Wait for the stragglers; give up after drainMs without progress.
    for (let seen = -1, progressAt = now(); receipts.received < sent && now() - progressAt < s.drainMs; await new Promise((r) => setTimeout(r, 10))) {
      if (receipts.received !== seen) [seen, progressAt] = [receipts.received, now()];
    }
    current = null;
    const seconds = (Math.max(receipts.lastAt, started) - started) / 1000;
    return { sent, received: receipts.received, inOrder: receipts.inOrder(), latenciesMs: receipts.latenciesMs, seconds, framesPerSec: receipts.received / seconds };
  };

  // ---- Warm-up: a short burst each (JIT, pool connections, the hubs' first frames).
  t = now();
  const warmFrames = Math.min(3, s.frames);
  for (const side of ['hub', 'bus'] as const) {
    const b = await burst(side, `warm${side}`, warmFrames);
    if (b.received !== b.sent) log(`  warm-up ${side}: ${b.received} of ${b.sent} frames arrived`);
  }
  log(`  warm-up: ${warmFrames} frames per conversation per side in ${((now() - t) / 1000).toFixed(1)} s`);

  // ---- Measured rounds, alternating which side goes first.
  const runs: RunStats[] = [];
  const bursts: Record<'hub' | 'bus', Burst[]> = { hub: [], bus: [] };
  for (let round = 1; round <= s.rounds; round++) {
    const order: Array<'hub' | 'bus'> = round % 2 === 1 ? ['hub', 'bus'] : ['bus', 'hub'];
    const line: string[] = [];
    for (const side of order) {
      const b = await burst(side, `r${round}${side}`, s.frames);
      bursts[side].push(b);
      runs.push(runStats(side === 'hub' ? 'hub (sockets)' : 'bus (same load)', round, b.seconds, b.received, b.latenciesMs, s.publishers, { delivered: b.received, lost: b.sent - b.received }));
      line.push(
        `${side} ${b.received}/${b.sent} frames, ${b.inOrder}/${conversations.length} in order, ${b.framesPerSec.toFixed(0)} frames/s ` +
          `(p50 ${ms(percentile(b.latenciesMs, 50))} ms, p99 ${ms(percentile(b.latenciesMs, 99))} ms)`,
      );
    }
    log(`  round ${round}: ${line.join('; ')}`);
  }
  if (strays.length) throw new Error(`${strays.length} unexpected frames arrived on the sockets, e.g. ${strays[0]}`);
  const busLost = bursts.bus.reduce((a, b) => a + b.sent - b.received, 0);
  if (busLost) throw new Error(`the bus baseline lost ${busLost} notices: the machine is not fit to measure this`);

  // ---- The bus's floor: NOTIFY → LISTEN on one connection, one at a time.
  const roundTrips = s.frames * conversations.length;
  let arrived: (() => void) | null = null;
  const rt = await listenOn(bench, ROUND_TRIP_CHANNEL, () => arrived?.());
  const rtMs: number[] = [];
  for (let i = 0; i < roundTrips; i++) {
    const t0 = now();
    const got = new Promise<void>((resolve) => (arrived = resolve));
    await rt.query('select pg_notify($1, $2)', [ROUND_TRIP_CHANNEL, frameText(i, t0)]);
    await got;
    rtMs.push(now() - t0);
  }
  const roundTrip = spread(rtMs);

  // ---- Summaries.
  const hub = summarizeTarget(runs, 'hub (sockets)');
  const bus = summarizeTarget(runs, 'bus (same load)');
  const comparison = compareTargets(runs, 'widget-sockets', 'hub (sockets)', 'bus (same load)', TARGET_RATIO, 'frames/s');

  const sent = bursts.hub.reduce((a, b) => a + b.sent, 0);
  const delivered = bursts.hub.reduce((a, b) => a + b.received, 0);
  const ordered = bursts.hub.reduce((a, b) => a + b.inOrder, 0);
  const streams = bursts.hub.length * conversations.length;
  const checks: Check[] = [
    { name: `widget-sockets frames delivered ÷ sent (${delivered} of ${sent})`, value: delivered / sent, unit: 'ratio', goal: '= 1.0', pass: delivered === sent },
    { name: `widget-sockets conversations in order (${ordered} of ${streams} over ${bursts.hub.length} rounds)`, value: ordered / streams, unit: 'ratio', goal: '= 1.0', pass: ordered === streams },
  ];
  const hubLat = spread(bursts.hub.flatMap((b) => b.latenciesMs));
  const busLat = spread(bursts.bus.flatMap((b) => b.latenciesMs));
  const headlines = [
    `widget-sockets: ${s.sockets} sockets on ${s.apps} app(s), ${s.frames} frames each per round: publish → socket p50 ${ms(hubLat.p50)} ms, p99 ${ms(hubLat.p99)} ms ` +
      `/ bus NOTIFY → LISTEN at the same load p50 ${ms(busLat.p50)} ms, p99 ${ms(busLat.p99)} ms → hub adds p50 ${ms(hubLat.p50 - busLat.p50)} ms, p99 ${ms(hubLat.p99 - busLat.p99)} ms`,
    `widget-sockets: ${delivered}/${sent} frames delivered, ${ordered}/${streams} conversation streams in order; ${hub.meanRequestsPerSec.toFixed(0)} frames/s vs bus ${bus.meanRequestsPerSec.toFixed(0)} frames/s; ` +
      `bus round trip on one idle connection p50 ${ms(roundTrip.p50)} ms, p99 ${ms(roundTrip.p99)} ms`,
  ];

  return {
    section: 'widget-sockets',
    description:
      `${s.sockets} conversations with an open reply socket on ${s.apps} API app(s) (ChatHub each); ${s.frames} reply_delta frames per conversation published with ` +
      `ChatFrames.publish from a separate pool (${s.publishers} in flight), vs the same notices received by one plain LISTEN connection; req/s = frames/s, latency = publish → arrival`,
    settings: { ...s, order: 'per round hub / bus alternating; mean over rounds' },
    runs,
    targets: [hub, bus],
    comparisons: [comparison],
    checks,
    headlines,
    details: { socketsPerApp: held, openSocketsMs: round1(openMs), latencyMs: { hub: hubLat, busSameLoad: busLat, busRoundTripOneConnection: roundTrip } },
  };
}

export const benchWidgetSockets = section(module, 'widget-sockets', measure);
