// What this measures and how to read it: docs/benchmarks.md#voice
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TurnStats } from '../domain/voice/agent';
import { speech8k, talkingVisitor, VISITOR_QUESTIONS as QUESTIONS, type VisitorReport } from '../dev/fakes/voice-browser';
import { forkRole, section, serveRole, type Cleanup } from './lib/child';
import { envInt, envNumber } from './lib/load';
import { benchLlm, benchStack, setUpBench } from './lib/setup';
import { below, comparison as compare, percentile, round1, waitFor } from './lib/stats';
import type { Check, Result } from './lib/types';
import { createWidgetSite, WIDGET_ORIGIN } from './lib/widget';

const GOAL_TURN_MS = 1200;
/** A gap longer than this between two agent packets of one talkspurt is an underrun. */
const UNDERRUN_GAP_MS = 40;
/** Direct STT + TTS at least this fraction of the pipeline's own share (VAD window and model taken out): the pipeline adds at most 25 %. */
const TARGET_RATIO = 0.8;
/** The bench's default per-workspace limit, for the concurrency check's goal. */
const VOICE_MAX_CONCURRENT_DEFAULT = 5;
/** The fake model's answer: one sentence, so the first sentence's synthesis is the whole reply's. */
const REPLY = 'Sure, I can help you with that right away.';
/** A turn not answered by then fails its level (a level's latency limit is far below it). */
const TURN_TIMEOUT_MS = 20_000;
/** Utterances the baseline transcribes directly. */
const BASELINE_SAMPLES = 5;

const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '-');

const settings = () => ({
  turns: envInt('BENCH_VOICE_TURNS', 10, 1), levels: (process.env.BENCH_VOICE_LEVELS || '2,4,8').split(',').map(Number).filter((n) => n >= 1),
  levelTurns: envInt('BENCH_VOICE_LEVEL_TURNS', 3, 1), llmDelayMs: envNumber('BENCH_VOICE_LLM_DELAY_MS', 200, 0),
});

/** A level: this many sessions at once, each this many turns. */
type LevelRequest = { sessions: number; turns: number };

/** The browsers' process: the questions spoken once, then each level's sessions on request. */
const browsers = () =>
  serveRole<LevelRequest, VisitorReport[]>(async () => {
    const at = { port: Number(process.env.BENCH_VOICE_PORT), siteId: process.env.BENCH_VOICE_SITE!, origin: WIDGET_ORIGIN };
    const opts = { underrunGapMs: UNDERRUN_GAP_MS, turnTimeoutMs: TURN_TIMEOUT_MS };
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-voice-bench-'));
    const speech = QUESTIONS.map((q) => speech8k(q, dir));
    fs.rmSync(dir, { recursive: true, force: true });
    return { handle: (m) => Promise.all(Array.from({ length: m.sessions }, (_, i) => talkingVisitor(at, m.turns, speech, i, opts))) };
  });

/** A turn's parts (ms); total: lastVoiceAt → firstAudioAt. */
type TurnFigures = Record<'vad' | 'stt' | 'model' | 'tts' | 'total' | 'totalExModel', number>;

const figuresOf = (t: TurnStats): TurnFigures => {
  const total = t.firstAudioAt - t.lastVoiceAt;
  return { vad: t.speechEndedAt - t.lastVoiceAt, stt: t.sttMs, model: t.modelMs, tts: t.ttsMs, total, totalExModel: total - t.modelMs };
};

const p = (xs: number[], q: number) => percentile(xs, q);
const col = (xs: TurnFigures[], k: keyof TurnFigures) => xs.map((x) => x[k]);

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = settings();
  const bench = await setUpBench(cleanup);
  const llm = await benchLlm(bench, REPLY, { firstByteDelayMs: s.llmDelayMs });
  const turns: Array<{ level: number; stats: TurnStats }> = [];
  let level = 0;
  const { dev, api } = await benchStack(bench, {
    oneProcess: true,
    // Every simulated visitor is one werift peer on this machine: the per-visitor/address caps
    // are lifted and ICE may reach this machine's own addresses (never so in production).
    config: {
      VOICE_MAX_CONCURRENT: 1000, VOICE_JOIN_TIMEOUT_SECONDS: 30, VOICE_MAX_SESSIONS_PER_VISITOR: 1000, VOICE_MAX_SESSIONS_PER_ADDRESS: 1000, VOICE_SIGNAL_MAX_SOCKETS_PER_ADDRESS: 1000,
      VOICE_ICE_ALLOW_CIDRS: ['127.0.0.0/8', '::1/128', ...Object.values(os.networkInterfaces()).flat().filter((a) => a !== undefined).map((a) => `${a.address.split('%')[0]}/${a.family === 'IPv4' ? 32 : 128}`)].join(','),
    },
    overrides: { services: { llm: llm.settings } },
    onVoiceTurn: (stats) => turns.push({ level, stats }),
  });
  const { c, url } = api;
  const { stt, tts } = c.voice;
  if (!stt || !tts) throw new Error(`voice cannot run here: ${c.voice.prereqs.voice} (npm run models:fetch; Debian espeak-ng)`);
  const { siteId } = await createWidgetSite(api, bench.workspaceId, 'Help shoppers.', 'Bench voice helper', { voice_chat: true });
  await c.services.credits.grant(bench.workspaceId, 100_000);
  const browserProcess = await forkRole<LevelRequest, VisitorReport[]>(__filename, 'browsers', cleanup, { BENCH_VOICE_PORT: new URL(url).port, BENCH_VOICE_SITE: siteId });
  const run = (sessions: number, turns: number) => browserProcess.call({ sessions, turns });
  log(`  setup: API + worker (one composition) ${url}, Temporal dev server ${dev.address}, fake model ${llm.url} (answers after ${s.llmDelayMs} ms), VOICE_SILENCE_MS ${c.config.VOICE_SILENCE_MS}, ${os.cpus().length} cores`);

  /** Every session of the level ended (recordings saved) before the next level starts. */
  const live = async () => (await c.em.fork().execute<Array<{ n: string }>>(`select count(*) as n from voice_sessions where status in ('starting', 'live')`))[0].n;
  const settled = () => waitFor(async () => (await live()) === '0', 60_000, () => 'the sessions to end', 200);

  // ---- (a) One session: a warm-up turn, then the measured turns.
  level = 1;
  const single = await run(1, s.turns + 1);
  await settled();
  const singleTurns = turns.filter((t) => t.level === 1).slice(1).map((t) => figuresOf(t.stats));
  if (singleTurns.length < Math.ceil(s.turns / 2)) throw new Error(`only ${singleTurns.length} of ${s.turns} turns were answered`);
  const singleE2e = single[0].e2eMs.slice(1).filter((x): x is number => x !== null);

  // ---- The baseline: the same utterances and reply through the worker's recognizer and synthesizer, directly.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-voice-bench-'));
  cleanup.push(['speech dir', async () => fs.rmSync(dir, { recursive: true, force: true })]);
  const direct: Array<{ stt: number; tts: number }> = [];
  for (let i = 0; i < BASELINE_SAMPLES; i++) {
    const samples = speech8k(QUESTIONS[i % QUESTIONS.length], dir);
    const t0 = performance.now();
    await stt.transcribe(samples);
    const t1 = performance.now();
    await tts.synthesize(REPLY);
    direct.push({ stt: t1 - t0, tts: performance.now() - t1 });
  }
  const directTotal = direct.map((d) => d.stt + d.tts);

  const exModel = col(singleTurns, 'totalExModel');
  const pipelineShare = singleTurns.map((t) => t.totalExModel - t.vad);
  const singleP50 = p(exModel, 50);
  const row = (name: string, xs: number[]) => `${name} p50 ${ms(p(xs, 50))} ms, p90 ${ms(p(xs, 90))} ms`;
  log(`  (a) one session, ${singleTurns.length} turns:`);
  for (const [name, k] of [['VAD (silence window)', 'vad'], ['STT (final)', 'stt'], ['TTS (first sentence)', 'tts'], ['model (actor turn + fake model)', 'model'], ['total excluding the model', 'totalExModel'], ['total', 'total']] as const) {
    log(`    ${name.padEnd(34)} ${row('', col(singleTurns, k))}`);
  }
  log(`    ${'at the browser (speech sent → audio)'.padEnd(34)} ${row('', singleE2e)}`);
  log(`    ${'baseline: direct STT + TTS'.padEnd(34)} ${row('', directTotal)} (STT ${ms(p(direct.map((d) => d.stt), 50))}, TTS ${ms(p(direct.map((d) => d.tts), 50))})`);
  log(`    single session: ${single[0].packets} agent packets, ${single[0].underruns} underruns, largest gap in a talkspurt ${ms(single[0].maxGapMs)} ms`);

  // ---- (b) N sessions at once (level 1: the single session above).
  const levelOf = (n: number, asked: number, figs: TurnFigures[], reports: VisitorReport[], e2e: number[], answered: number) => {
    const ex = col(figs, 'totalExModel');
    const underruns = reports.reduce((a, r) => a + r.underruns, 0);
    return { n, turns: asked, answered, exModelP50: p(ex, 50), exModelP90: p(ex, 90), sttP50: p(col(figs, 'stt'), 50), e2eP50: p(e2e, 50), underruns, maxGapMs: Math.max(...reports.map((r) => r.maxGapMs)), pass: underruns === 0 };
  };
  const levels = [levelOf(1, s.turns, singleTurns, single, singleE2e, singleTurns.length)];
  for (const n of s.levels) {
    level = n;
    const started = performance.now();
    const reports = await run(n, s.levelTurns);
    await settled();
    const e2e = reports.flatMap((r) => r.e2eMs).filter((x): x is number => x !== null);
    const l = levelOf(n, n * s.levelTurns, turns.filter((t) => t.level === n).map((t) => figuresOf(t.stats)), reports, e2e, e2e.length);
    l.pass &&= l.answered === l.turns && l.exModelP50 < 2 * singleP50;
    levels.push(l);
    log(
      `  (b) ${n} sessions: ${l.answered}/${l.turns} turns answered; excluding the model p50 ${ms(l.exModelP50)} ms, p90 ${ms(l.exModelP90)} ms (STT p50 ${ms(l.sttP50)} ms); ` +
        `at the browser p50 ${ms(l.e2eP50)} ms; ${l.underruns} underruns, largest gap ${ms(l.maxGapMs)} ms → ${l.pass ? 'ok' : 'FAILS'} (${((performance.now() - started) / 1000).toFixed(0)} s)`,
    );
    if (!l.pass) break;
  }
  const passing = levels.filter((l, i) => l.pass && levels.slice(0, i).every((x) => x.pass));
  const best = passing.at(-1)?.n ?? 0;

  const pipelineP50 = p(pipelineShare, 50);
  const directP50 = p(directTotal, 50);
  const comparison = compare(
    { name: 'voice turn: pipeline (excluding VAD window and model) vs direct STT + TTS', subject: 'voice pipeline (turns/s)', baseline: 'direct STT + TTS', subjectUnit: 'turns/s', baselineUnit: 'turns/s' },
    { subject: 1000 / pipelineP50, baseline: 1000 / directP50, target: TARGET_RATIO, best: Math.min(...directTotal) / Math.min(...pipelineShare) },
    directP50 / pipelineP50,
  );
  const checks: Check[] = [
    below('voice turn latency excluding the model, p50', singleP50, 'ms', GOAL_TURN_MS),
    below('voice turn latency excluding the model, p90', p(exModel, 90), 'ms', GOAL_TURN_MS),
    { name: `voice concurrent sessions on ${os.cpus().length} cores (no underruns, latency < 2× single)`, value: best, unit: 'sessions', goal: `>= ${VOICE_MAX_CONCURRENT_DEFAULT}`, pass: best >= VOICE_MAX_CONCURRENT_DEFAULT },
  ];
  const pcts = (q: number) => Object.fromEntries((['vad', 'stt', 'tts', 'model', 'total', 'totalExModel'] as const).map((k) => [k, round1(p(col(singleTurns, k), q))]));
  const parts = (['vad', 'stt', 'tts', 'model'] as const).map((k) => `${k.toUpperCase()} ${ms(p(col(singleTurns, k), 50))}`).join(', ');
  const headlines = [
    `voice turn (one session, ${singleTurns.length} turns): end of speech → first agent audio excluding the model p50 ${ms(singleP50)} ms, p90 ${ms(p(exModel, 90))} ms (p50 parts: ${parts} ms; the model step is the actor's turn with the fake model's ${s.llmDelayMs} ms); with the model p50 ${ms(p(col(singleTurns, 'total'), 50))} ms; at the browser p50 ${ms(p(singleE2e, 50))} ms`,
    `voice concurrency: ${levels.map((l) => `N=${l.n} p50 ${ms(l.exModelP50)} ms, ${l.underruns} underruns${l.pass ? '' : ' FAILS'}`).join('; ')} → largest N passing: ${best}`,
  ];
  return {
    section: 'voice',
    description: '(a) one browser voice session: end of speech → first agent audio by step, against direct STT + TTS calls; (b) N sessions at once: underruns and turn latency per N',
    settings: { ...s, silenceMs: c.config.VOICE_SILENCE_MS, underrunGapMs: UNDERRUN_GAP_MS, reply: REPLY, loadAverage: os.loadavg().map(round1) },
    comparisons: [comparison],
    checks,
    headlines,
    details: { single: { turns: singleTurns, browserMs: single[0].e2eMs, direct, p50: pcts(50), p90: pcts(90) }, levels, largestPassingN: best },
  };
}

export const benchVoice = section(module, 'voice', measure, { env: { LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' }, roles: { browsers } });
