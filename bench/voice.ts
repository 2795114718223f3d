// The voice section: browser voice sessions end to end, as the widget runs them. API + worker
// are one composition (role both, as `npm start`) on a Temporal dev server; the browsers are
// werift peers in a process of their own, joining through POST /widget/voice/start and the
// signalling socket, speaking espeak-ng questions as 8 kHz PCMU and hearing the agent's RTP.
// The agent runs the real pipeline: VAD, the embedded whisper (partials, then the final), the
// conversation actor's turn against a fake model answering after a fixed delay, espeak-ng, paced RTP.
//
// (a) One session, BENCH_VOICE_TURNS turns after a warm-up: end of speech → first agent audio
//     from the agent's own per-turn figures (startWorker's onVoiceTurn): VAD (the silence
//     window), STT (turn end → final transcript), model (reported apart), TTS (first sentence);
//     the total excluding the model against the goal (< 1.2 s); also at the browser. Baseline,
//     same run: the same utterances and reply through the worker's recognizer and synthesizer
//     called directly; the ratio compares it with the pipeline's time excluding the VAD window
//     and the model (what the pipeline adds around whisper and espeak).
// (b) N sessions at once (BENCH_VOICE_LEVELS, BENCH_VOICE_LEVEL_TURNS turns each): an underrun
//     is a gap > 40 ms between two agent packets of one talkspurt (a late PacedLeg tick). A level
//     passes with no underruns and a p50 (excluding the model) under twice the single session's;
//     levels stop at the first that fails. The answer: the largest N that passes.
//
// BENCH_VOICE_TURNS (10), BENCH_VOICE_LEVELS (2,4,8), BENCH_VOICE_LEVEL_TURNS (3),
// BENCH_VOICE_LLM_DELAY_MS (200), VOICE_SILENCE_MS (the shipped 500), TRANSCRIBE_THREADS.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TurnStats } from '../domain/voice/agent';
import { joinAsBrowser, speech8k, type VoiceBrowser } from '../dev/fakes/voice-browser';
import { forkRole, section, serveRole, type Cleanup } from './lib/child';
import { envNumber } from './lib/load';
import { benchLlm, benchStack, setUpBench } from './lib/setup';
import { comparison as compare, percentile, round1, waitFor } from './lib/stats';
import type { Check, Result } from './lib/types';
import { createWidgetSite, WIDGET_ORIGIN } from './lib/widget';

const GOAL_TURN_MS = 1200;
/** A gap longer than this between two agent packets of one talkspurt is an underrun. */
const UNDERRUN_GAP_MS = 40;
/** Direct STT + TTS at least this fraction of the pipeline's own share (VAD window and model taken out): the pipeline adds at most 25 %. */
const TARGET_RATIO = 0.8;
/** The bench's default per-workspace limit, for the concurrency check's goal. */
const VOICE_MAX_CONCURRENT_DEFAULT = 5;
const QUESTIONS = [
  'What are your opening hours?',
  'Do you ship to Canada?',
  'How much does delivery cost?',
  'Can I return a jacket?',
  'Where is my parcel?',
  'Do you have this in blue?',
];
/** The fake model's answer: one sentence, so the first sentence's synthesis is the whole reply's. */
const REPLY = 'Sure, I can help you with that right away.';
/** A turn not answered by then fails its level (a level's latency limit is far below it). */
const TURN_TIMEOUT_MS = 20_000;
/** Utterances the baseline transcribes directly. */
const BASELINE_SAMPLES = 5;

const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '-');

function settings() {
  return {
    turns: Math.round(envNumber('BENCH_VOICE_TURNS', 10, 1)),
    levels: (process.env.BENCH_VOICE_LEVELS || '2,4,8').split(',').map(Number).filter((n) => n >= 1),
    levelTurns: Math.round(envNumber('BENCH_VOICE_LEVEL_TURNS', 3, 1)),
    llmDelayMs: envNumber('BENCH_VOICE_LLM_DELAY_MS', 200, 0),
  };
}

// ---- The browsers' process ---------------------------------------------------------------

/** A level: this many sessions at once, each this many turns. */
type LevelRequest = { sessions: number; turns: number };
/** One session's side as its browser saw it (times: ms epoch). */
interface SessionReport {
  /** Per turn: the last speech sample sent → the first agent packet after it; null when no answer came. */
  e2eMs: Array<number | null>;
  packets: number;
  underruns: number;
  maxGapMs: number;
}

/** Gaps inside talkspurts (a marker packet starts one: the gap before it is silence between replies). */
function gapsOf(browser: VoiceBrowser): { underruns: number; maxGapMs: number } {
  let underruns = 0;
  let maxGapMs = 0;
  const p = browser.packets;
  for (let i = 1; i < p.length; i++) {
    if (p[i].marker) continue;
    const gap = p[i].at - p[i - 1].at;
    maxGapMs = Math.max(maxGapMs, gap);
    if (gap > UNDERRUN_GAP_MS) underruns++;
  }
  return { underruns, maxGapMs };
}

async function oneSession(url: { port: number; siteId: string }, turns: number, speech: Int16Array[], offset: number): Promise<SessionReport> {
  const res = await fetch(`http://127.0.0.1:${url.port}/api/public/widget/voice/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-concierge-site': url.siteId, origin: WIDGET_ORIGIN },
    body: '{}',
  });
  if (res.status !== 200) throw new Error(`voice/start answered ${res.status}: ${await res.text()}`);
  const browser = await joinAsBrowser((await res.json()) as { rtc_url: string; rtc_token: string }, url.port);
  const e2eMs: Array<number | null> = [];
  try {
    // Room noise first, as a microphone sends before anyone speaks; staggered a little between sessions.
    await new Promise((r) => setTimeout(r, 500 + Math.random() * 500));
    for (let i = 0; i < turns; i++) {
      const finals = () => browser.frames.filter((f) => f.speaker === 'assistant' && !f.partial).length;
      const before = finals();
      browser.say(speech[(offset + i) % speech.length]);
      await waitFor(() => !browser.speaking && browser.saidAt > 0, 30_000, () => 'the browser to finish speaking', 5);
      const saidAt = browser.saidAt;
      try {
        await waitFor(() => finals() > before, TURN_TIMEOUT_MS, () => 'an answer', 20);
        const first = browser.packets.find((p) => p.at > saidAt);
        e2eMs.push(first ? first.at - saidAt : null);
        // The answer heard out: no agent packet for 300 ms.
        await waitFor(() => performance.now() - (browser.packets.at(-1)?.at ?? 0) > 300, 30_000, () => 'the answer to end', 20);
      } catch {
        e2eMs.push(null);
      }
      await new Promise((r) => setTimeout(r, 300 + Math.random() * 500));
    }
    return { e2eMs, packets: browser.packets.length, ...gapsOf(browser) };
  } finally {
    await browser.hangUp();
  }
}

/** The browsers' process: the questions spoken once, then each level's sessions on request. */
const browsers = () =>
  serveRole<LevelRequest, SessionReport[]>(async () => {
    const at = { port: Number(process.env.BENCH_VOICE_PORT), siteId: process.env.BENCH_VOICE_SITE! };
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-voice-bench-'));
    const speech = QUESTIONS.map((q) => speech8k(q, dir));
    fs.rmSync(dir, { recursive: true, force: true });
    return { handle: (m) => Promise.all(Array.from({ length: m.sessions }, (_, i) => oneSession(at, m.turns, speech, i))) };
  });

// ---- The service's process: the measurement --------------------------------------------

interface TurnFigures {
  vad: number;
  stt: number;
  model: number;
  tts: number;
  /** lastVoiceAt → firstAudioAt. */
  total: number;
  totalExModel: number;
}

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
      VOICE_MAX_CONCURRENT: 1000,
      VOICE_JOIN_TIMEOUT_SECONDS: 30,
      VOICE_MAX_SESSIONS_PER_VISITOR: 1000,
      VOICE_MAX_SESSIONS_PER_ADDRESS: 1000,
      VOICE_SIGNAL_MAX_SOCKETS_PER_ADDRESS: 1000,
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
  const browserProcess = await forkRole<LevelRequest, SessionReport[]>(__filename, 'browsers', cleanup, { BENCH_VOICE_PORT: new URL(url).port, BENCH_VOICE_SITE: siteId });
  const run = (sessions: number, turns: number) => browserProcess.call({ sessions, turns });
  log(`  setup: API + worker (one composition) ${url}, Temporal dev server ${dev.address}, fake model ${llm.url} (answers after ${s.llmDelayMs} ms), VOICE_SILENCE_MS ${c.config.VOICE_SILENCE_MS}, ${os.cpus().length} cores`);

  /** Every session of the level ended (recordings saved) before the next level starts. */
  const settled = () =>
    waitFor(
      async () => (await c.em.fork().execute<Array<{ n: string }>>(`select count(*) as n from voice_sessions where status in ('starting', 'live')`))[0].n === '0',
      60_000,
      () => 'the sessions to end',
      200,
    );

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

  // ---- (b) N sessions at once.
  const levels: Array<{ n: number; turns: number; answered: number; exModelP50: number; exModelP90: number; sttP50: number; e2eP50: number; underruns: number; maxGapMs: number; pass: boolean }> = [
    {
      n: 1,
      turns: s.turns,
      answered: singleTurns.length,
      exModelP50: singleP50,
      exModelP90: p(exModel, 90),
      sttP50: p(col(singleTurns, 'stt'), 50),
      e2eP50: p(singleE2e, 50),
      underruns: single[0].underruns,
      maxGapMs: single[0].maxGapMs,
      pass: single[0].underruns === 0,
    },
  ];
  for (const n of s.levels) {
    level = n;
    const started = performance.now();
    const reports = await run(n, s.levelTurns);
    await settled();
    const figs = turns.filter((t) => t.level === n).map((t) => figuresOf(t.stats));
    const ex = col(figs, 'totalExModel');
    const e2e = reports.flatMap((r) => r.e2eMs).filter((x): x is number => x !== null);
    const underruns = reports.reduce((a, r) => a + r.underruns, 0);
    const maxGapMs = Math.max(...reports.map((r) => r.maxGapMs));
    const answered = reports.flatMap((r) => r.e2eMs).filter((x) => x !== null).length;
    const pass = underruns === 0 && answered === n * s.levelTurns && p(ex, 50) < 2 * singleP50;
    levels.push({ n, turns: n * s.levelTurns, answered, exModelP50: p(ex, 50), exModelP90: p(ex, 90), sttP50: p(col(figs, 'stt'), 50), e2eP50: p(e2e, 50), underruns, maxGapMs, pass });
    log(
      `  (b) ${n} sessions: ${answered}/${n * s.levelTurns} turns answered; excluding the model p50 ${ms(p(ex, 50))} ms, p90 ${ms(p(ex, 90))} ms (STT p50 ${ms(p(col(figs, 'stt'), 50))} ms); ` +
        `at the browser p50 ${ms(p(e2e, 50))} ms; ${underruns} underruns, largest gap ${ms(maxGapMs)} ms → ${pass ? 'ok' : 'FAILS'} (${((performance.now() - started) / 1000).toFixed(0)} s)`,
    );
    if (!pass) break;
  }
  const passing = levels.filter((l, i) => l.pass && levels.slice(0, i).every((x) => x.pass));
  const best = passing.at(-1)?.n ?? 0;

  const pipelineP50 = p(pipelineShare, 50);
  const directP50 = p(directTotal, 50);
  const comparison = compare({
    name: 'voice turn: pipeline (excluding VAD window and model) vs direct STT + TTS',
    subject: 'voice pipeline (turns/s)',
    baseline: 'direct STT + TTS',
    subjectRequestsPerSec: 1000 / pipelineP50,
    baselineRequestsPerSec: 1000 / directP50,
    roundRatios: [],
    bestRatio: Math.min(...directTotal) / Math.min(...pipelineShare),
    target: TARGET_RATIO,
    subjectUnit: 'turns/s',
    baselineUnit: 'turns/s',
  }, directP50 / pipelineP50);
  const checks: Check[] = [
    { name: 'voice turn latency excluding the model, p50', value: singleP50, unit: 'ms', goal: `< ${GOAL_TURN_MS}`, pass: singleP50 < GOAL_TURN_MS },
    { name: 'voice turn latency excluding the model, p90', value: p(exModel, 90), unit: 'ms', goal: `< ${GOAL_TURN_MS}`, pass: p(exModel, 90) < GOAL_TURN_MS },
    { name: `voice concurrent sessions on ${os.cpus().length} cores (no underruns, latency < 2× single)`, value: best, unit: 'sessions', goal: `>= ${VOICE_MAX_CONCURRENT_DEFAULT}`, pass: best >= VOICE_MAX_CONCURRENT_DEFAULT },
  ];
  const parts = (['vad', 'stt', 'tts', 'model'] as const).map((k) => `${k.toUpperCase()} ${ms(p(col(singleTurns, k), 50))}`).join(', ');
  const headlines = [
    `voice turn (one session, ${singleTurns.length} turns): end of speech → first agent audio excluding the model p50 ${ms(singleP50)} ms, p90 ${ms(p(exModel, 90))} ms (p50 parts: ${parts} ms; the model step is the actor's turn with the fake model's ${s.llmDelayMs} ms); with the model p50 ${ms(p(col(singleTurns, 'total'), 50))} ms; at the browser p50 ${ms(p(singleE2e, 50))} ms`,
    `voice concurrency: ${levels.map((l) => `N=${l.n} p50 ${ms(l.exModelP50)} ms, ${l.underruns} underruns${l.pass ? '' : ' FAILS'}`).join('; ')} → largest N passing: ${best}`,
  ];
  return {
    section: 'voice',
    description:
      'Browser voice sessions (werift peers in their own process, espeak-ng questions as 8 kHz PCMU) against API + worker in one composition: VAD → whisper → conversation actor (fake model, fixed delay) → espeak-ng → paced RTP. ' +
      '(a) one session: end of speech → first agent audio by step; baseline: direct recognizer + synthesizer calls on the same audio and reply. (b) N sessions at once: underruns (gaps > 40 ms inside a talkspurt) and turn latency per N.',
    settings: { ...s, silenceMs: c.config.VOICE_SILENCE_MS, underrunGapMs: UNDERRUN_GAP_MS, reply: REPLY, loadAverage: os.loadavg().map(round1) },
    comparisons: [comparison],
    checks,
    headlines,
    details: {
      single: {
        turns: singleTurns,
        browserMs: single[0].e2eMs,
        direct,
        p50: Object.fromEntries((['vad', 'stt', 'tts', 'model', 'total', 'totalExModel'] as const).map((k) => [k, round1(p(col(singleTurns, k), 50))])),
        p90: Object.fromEntries((['vad', 'stt', 'tts', 'model', 'total', 'totalExModel'] as const).map((k) => [k, round1(p(col(singleTurns, k), 90))])),
      },
      levels,
      largestPassingN: best,
    },
  };
}

export const benchVoice = section(module, 'voice', measure, { env: { LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' }, roles: { browsers } });
