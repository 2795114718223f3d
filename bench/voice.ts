// What this measures and how to read it: docs/benchmarks.md#voice
import dgram from 'node:dgram';
import os from 'node:os';
import type { TurnStats } from '../domain/voice/agent';
import { clauseEnd } from '../domain/voice/agent';
import type { RecognizeOptions, SpeechRecognizer } from '../domain/ports/speech';
import { transcriberFromConfig } from '../app/extractor';
import { voiceSpeechModels } from '../app/voice';
import { speechRecognizerFor } from '../providers/speech/stt';
import { LocalWhisperTranscriber } from '../providers/speech/whisper';
import { userHash } from '../domain/widget/sites';
import { forkRole, section, serveRole, type Cleanup } from './lib/child';
import { envInt, envNumber } from './lib/load';
import { benchConfig, benchLlm, benchStack, setUpBench, UNREACHABLE } from './lib/setup';
import { comparison as compare, percentile, procMemory, round1, waitFor } from './lib/stats';
import type { Check, Result } from './lib/types';
import { publishAgent, WIDGET_ORIGIN } from './lib/widget';
import { browserCaller, phoneMedia, sippAnswering, type CallerReport, type CallerTurn, watchLoop } from './lib/voice-callers';
import { realRecordings, wordErrorRate } from './lib/voice-recordings';
import { SEND_AHEAD_MS } from '../lib/audio/paced-leg';

/** Issue 32's goal: end of the caller's speech → first agent audio at the caller, the model's own time taken out. */
const GOAL_P50_MS = 450;
const GOAL_P90_MS = 800;
/**
 * The callers' jitter buffer: one packet, the least a receiver holds (a browser's NetEq holds more). An underrun is a
 * packet arriving after its play time with it (bench/lib/voice-callers.ts playout); for audio sent on the clock that is
 * a gap over 40 ms between two packets, the rule before the legs sent ahead (lib/audio/paced-leg.ts SEND_AHEAD_MS).
 */
const JITTER_BUFFER_MS = 20;
/** Sessions at once the machine must carry (no underruns, turn p50 under twice the single session's). */
const CONCURRENCY_GOAL = 4;
/**
 * The fake model's answer, streamed CHUNK_CHARS at a time: its first clause is the first sentence, then a second
 * one, so the first clause is spoken while the model still writes.
 */
const REPLY = 'Sure, I can help you with that right away. We are open every day from nine in the morning to six in the evening.';
const CHUNK_CHARS = 8;
/** A turn not answered by then counts as unanswered (the whisper baseline's: a minute, its STT alone may take 20 s on a busy machine). */
const TURN_TIMEOUT_MS = 20_000;
const WHISPER_TURN_TIMEOUT_MS = 60_000;
/** The dialled number (the widget visitor's own phone, signed by the site's backend). */
const PHONE = '+12025550143';

const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '-');
const p = (xs: number[], q: number) => percentile(xs, q);

const settings = () => ({
  turns: envInt('BENCH_VOICE_TURNS', 11, 1),
  whisperTurns: envInt('BENCH_VOICE_WHISPER_TURNS', 11, 0),
  sipTurns: envInt('BENCH_VOICE_SIP_TURNS', 6, 0),
  levels: (process.env.BENCH_VOICE_LEVELS || '2,4').split(',').map(Number).filter((n) => n >= 2),
  levelTurns: envInt('BENCH_VOICE_LEVEL_TURNS', 3, 1),
  llmDelayMs: envNumber('BENCH_VOICE_LLM_DELAY_MS', 200, 0),
  llmChunkMs: envNumber('BENCH_VOICE_LLM_CHUNK_MS', 20, 0),
});

/**
 * The fake model's own times (it sleeps `delay`, sends its role event, then one event per chunk every `chunk` ms):
 * its first token, the chunk that completes the first clause as the agent cuts it (clauseEnd), the whole reply.
 */
function modelOwn(delay: number, chunk: number) {
  const chunks = Math.ceil(REPLY.length / CHUNK_CHARS);
  let k = 1;
  while (k < chunks && clauseEnd(REPLY.slice(0, k * CHUNK_CHARS)) === 0) k++;
  return { firstTokenMs: delay + chunk, firstClauseMs: delay + k * chunk, wholeMs: delay + (chunks + 1) * chunk };
}

type CallerRequest = ({ kind: 'browser'; orders: number[][] } | { kind: 'phone'; order: number[]; sipPort: number; siteSecret: string }) & { turnTimeoutMs?: number };

/** The callers' process: the recordings loaded once, then each run's sessions on request. */
const callers = () =>
  serveRole<CallerRequest, CallerReport[]>(async () => {
    const at = { port: Number(process.env.BENCH_VOICE_PORT), siteId: process.env.BENCH_VOICE_SITE!, origin: WIDGET_ORIGIN };
    const speech = realRecordings().map((r) => r.samples);
    return {
      handle: async (m) => {
        const opts = { jitterBufferMs: JITTER_BUFFER_MS, turnTimeoutMs: m.turnTimeoutMs ?? TURN_TIMEOUT_MS };
        if (m.kind === 'browser') {
          const loop = watchLoop();
          const reports = await Promise.all(m.orders.map((order) => browserCaller(at, speech, order, opts)));
          const delay = loop();
          return reports.map((r) => ({ ...r, loop: delay }));
        }
        // The phone: SIPp answers the dial-out and waits for our BYE; this process is the phone's media address.
        const socket = dgram.createSocket('udp4');
        await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
        const sipp = sippAnswering(socket.address().port, m.sipPort);
        // The bench ends the call once the phone has said everything (its BYE ends SIPp), or SIPp is stopped a minute later.
        const done = () => void Promise.race([sipp.exited, new Promise((r) => setTimeout(r, 60_000))]).then(() => (sipp.stop(), socket.close()));
        try {
          await new Promise((r) => setTimeout(r, 300));
          const widget = async (path: string, payload: object) => {
            const res = await fetch(`http://127.0.0.1:${at.port}/api/public/widget/${path}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-concierge-site': at.siteId, origin: at.origin },
              body: JSON.stringify(payload),
            });
            if (res.status !== 200) throw new Error(`widget ${path} answered ${res.status}: ${await res.text()}`);
            return (await res.json()) as Record<string, string>;
          };
          const conversation = (await widget('init', {})).conversation_id;
          const user_context = { phone: PHONE, user_hash: userHash(m.siteSecret, at.siteId, `phone:${PHONE}`) };
          const { call_id } = await widget('call', { phone_number: PHONE, conversation_id: conversation, user_context });
          const loop = watchLoop();
          const report = await phoneMedia(socket, sipp.inviteSdp, opts, speech, m.order);
          return [{ ...report, callId: call_id, loop: loop() }];
        } finally {
          done();
        }
      },
    };
  });

/** Switches the worker's recognizer between the shipped one and the whisper baseline (the same recordings, one run each). */
class SwitchableRecognizer implements SpeechRecognizer {
  constructor(public current: SpeechRecognizer) {}
  transcribe(samples: Int16Array, signal?: AbortSignal, options?: RecognizeOptions): Promise<string> {
    return this.current.transcribe(samples, signal, options);
  }
}

/** A measured turn: at the caller, and by step from the worker's stats of the same turn. */
interface Turn {
  /** The recording said (an index into realRecordings()). */
  recording: number;
  e2e: number;
  goal: number;
  steps: { uplink: number; vad: number; stt: number; model: number; actor: number; tts: number; transport: number; whole: number } | null;
  text: string | null;
}

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const s = settings();
  const own = modelOwn(s.llmDelayMs, s.llmChunkMs);
  const bench = await setUpBench(cleanup);
  const llm = await benchLlm(bench, REPLY, { firstByteDelayMs: s.llmDelayMs, chunkDelayMs: s.llmChunkMs, chunkChars: CHUNK_CHARS });
  const recordings = realRecordings();
  const sipPort = 20000 + 2 * Math.floor(Math.random() * 15000);
  const config = {
    // Every simulated visitor is one werift peer on this machine: the per-visitor/address caps are lifted and ICE may
    // reach this machine's own addresses (never so in production).
    VOICE_MAX_CONCURRENT: 1000, VOICE_WORKER_CAPACITY: 1000, VOICE_JOIN_TIMEOUT_SECONDS: 30, VOICE_MAX_SESSIONS_PER_VISITOR: 1000, VOICE_MAX_SESSIONS_PER_ADDRESS: 1000, VOICE_SIGNAL_MAX_SOCKETS_PER_ADDRESS: 1000,
    VOICE_ICE_ALLOW_CIDRS: ['127.0.0.0/8', '::1/128', ...Object.values(os.networkInterfaces()).flat().filter((a) => a !== undefined).map((a) => `${a.address.split('%')[0]}/${a.family === 'IPv4' ? 32 : 128}`)].join(','),
    // The phone leg: SIPp on loopback as the trunk.
    SIP_TRUNK_URI: `sip:127.0.0.1:${sipPort}`, SIP_FROM_NUMBER: '+14155550100',
    DIAL_OUT_CALLS_PER_VISITOR: UNREACHABLE, DIAL_OUT_CALLS_PER_ADDRESS: UNREACHABLE, DIAL_OUT_CALLS_PER_DESTINATION: UNREACHABLE,
    TRANSCRIBE_LANGUAGE: 'en' as const,
  };
  // The worker's speech-to-text as shipped (VOICE_STT_MODEL moonshine), and the baseline with whisper for finals (VOICE_STT_MODEL base).
  const cfg = benchConfig(bench.dir, config);
  const transcriber = transcriberFromConfig(cfg);
  const models = voiceSpeechModels(cfg, transcriber);
  const shipped = speechRecognizerFor(transcriber, cfg.VOICE_LANGUAGE, models);
  const whisper = speechRecognizerFor(transcriber, cfg.VOICE_LANGUAGE, { final: transcriber instanceof LocalWhisperTranscriber ? transcriber : null, partial: models.partial });
  if (!shipped || !whisper) throw new Error('voice cannot run here: no embedded speech-to-text (npm run models:fetch)');
  const stt = new SwitchableRecognizer(shipped);
  const stats: Array<{ run: string; stats: TurnStats; at: number }> = [];
  let run = 'warm-up';
  const { dev, api } = await benchStack(bench, {
    oneProcess: true,
    config,
    overrides: { services: { llm: llm.settings }, voice: { stt } },
    onVoiceTurn: (t) => stats.push({ run, stats: t, at: Date.now() }),
  });
  const { c, url } = api;
  const tts = c.voice.tts;
  if (!tts) throw new Error(`voice cannot run here: ${c.voice.prereqs.voice} (Debian espeak-ng)`);
  const { agentId } = await publishAgent(api, bench.workspaceId, { name: 'Bench voice helper', instructions: 'Help shoppers.', triggers: { web_chat: { allowed_origins: [WIDGET_ORIGIN], voice_chat: true, dial_out: true } } });
  const site = await c.services.sites.create(bench.workspaceId, agentId, [WIDGET_ORIGIN]);
  await c.services.credits.grant(bench.workspaceId, 1_000_000);
  const callerProcess = await forkRole<CallerRequest, CallerReport[]>(__filename, 'callers', cleanup, { BENCH_VOICE_PORT: new URL(url).port, BENCH_VOICE_SITE: site.site_id });
  const paths = (r: SpeechRecognizer) => (r as { modelPaths?: { final: string; partial: string } }).modelPaths;
  log(
    `  setup: API + worker (one composition) ${url}, Temporal dev server ${dev.address}, ${os.cpus().length} cores (load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}); fake model ${llm.url}: first token after ${own.firstTokenMs} ms, ` +
      `the first clause after ${own.firstClauseMs} ms, the whole reply after ${own.wholeMs} ms (${CHUNK_CHARS} characters per ${s.llmChunkMs} ms); VOICE_SILENCE_MS ${c.config.VOICE_SILENCE_MS}; ` +
      `${recordings.length} real recordings (pocketsphinx-testdata: ${recordings.map((r) => `${(r.samples.length / 8000).toFixed(1)} s`).join(', ')}); ` +
      `STT finals ${paths(shipped)?.final ?? '?'}, baseline ${paths(whisper)?.final ?? '?'}, partials ${paths(shipped)?.partial ?? '?'}`,
  );
  // The models loaded before anything is measured (the worker loads them once and every session shares them).
  for (const r of [shipped, whisper]) await r.transcribe(recordings[0].samples);
  await tts.synthesize(REPLY);

  const live = async () => {
    const rows = await c.em.fork().execute<Array<{ n: string }>>(`select (select count(*) from voice_sessions where status in ('starting', 'live')) + (select count(*) from calls where status in ('calling', 'ringing', 'in_progress')) as n`);
    return Number(rows[0].n);
  };
  const settled = () => waitFor(async () => (await live()) === 0, 60_000, () => 'the sessions and calls to end', 200);
  /** One run: its callers' reports and the turns they measured (`skip`: the first turns of each session, a warm-up). */
  const runCallers = async (name: string, req: CallerRequest, skip: number) => {
    run = name;
    const started = performance.now();
    const loop = watchLoop();
    const reports = await callerProcess.call(req);
    const serviceLoop = loop();
    // A phone call is ended as an API stop ends it (a control notice to its media activity: our BYE).
    for (const r of reports) if (r.callId) await c.services.voice.control(r.callId, { k: 'end', reason: 'stopped' });
    await settled();
    const mine = stats.filter((x) => x.run === name);
    const turns = reports.flatMap((r) => r.turns.slice(skip)).map((t) => join(t, mine));
    return { reports, turns, asked: reports.reduce((a, r) => a + r.turns.length - skip, 0), seconds: (performance.now() - started) / 1000, serviceLoop };
  };
  /** The caller's turn with the worker's stats of the same turn: the one whose first frame was handed to the leg last before the caller heard it. */
  const join = (t: CallerTurn, mine: Array<{ stats: TurnStats; at: number }>): Turn | null => {
    if (t.firstAt === null) return null;
    const e2e = t.firstAt - t.endAt;
    const s = mine
      .filter((x) => x.stats.firstAudioAt <= t.firstAt! + 5 && t.firstAt! - x.stats.firstAudioAt < 1000)
      .sort((a, b) => b.stats.firstAudioAt - a.stats.firstAudioAt)[0]?.stats;
    const at = mine.find((x) => x.stats === s)?.at ?? 0;
    return {
      recording: t.recording,
      e2e,
      goal: e2e - own.firstClauseMs,
      text: s?.text ?? null,
      steps: s
        ? {
            uplink: s.lastVoiceAt - t.endAt,
            vad: s.speechEndedAt - s.lastVoiceAt,
            stt: s.sttMs,
            model: s.modelMs,
            actor: s.modelMs - own.firstClauseMs,
            tts: s.ttsMs,
            transport: t.firstAt - s.firstAudioAt,
            whole: at - s.speechEndedAt - s.sttMs,
          }
        : null,
    };
  };
  /** The turns whose recording ends a sentence: a caller who stops mid-sentence (Recording.goesOn) is waited for. */
  const ended = (ts: Turn[]) => ts.filter((t) => !recordings[t.recording].goesOn);
  const answered = (turns: Array<Turn | null>) => turns.filter((t): t is Turn => t !== null);
  const stepRows = (ts: Turn[]) => {
    const st = ts.flatMap((t) => (t.steps ? [t.steps] : []));
    const col = (k: keyof NonNullable<Turn['steps']>) => st.map((x) => x[k]);
    const row = (xs: number[]) => `p50 ${ms(p(xs, 50)).padStart(5)} ms, p90 ${ms(p(xs, 90)).padStart(5)} ms`;
    return [
      ['caller → agent (last voiced frame seen)', row(col('uplink'))],
      ['VAD (last voiced frame → turn end)', row(col('vad'))],
      ['STT (final, after the turn end)', row(col('stt'))],
      [`model to first clause (fake model's own ${own.firstClauseMs} ms; first token ${own.firstTokenMs} ms)`, row(col('model'))],
      ['  of which the actor (turn, deltas)', row(col('actor'))],
      ['TTS (first clause)', row(col('tts'))],
      ['transport (frame to the leg → at the caller)', row(col('transport'))],
      ['at the caller: end of speech → first audio', row(ts.map((t) => t.e2e))],
      [`GOAL FIGURE: the same minus the model's ${own.firstClauseMs} ms (${ended(ts).length} turns that end a sentence)`, row(ended(ts).map((t) => t.goal))],
      [`  every turn, mid-sentence stops included (${ts.length}: the agent waits there by design)`, row(ts.map((t) => t.goal))],
      ['(the whole reply in hand after the transcript, ≥)', row(col('whole'))],
    ];
  };
  const werOf = (ts: Array<Turn | null>, reports: CallerReport[], skip: number) => {
    const said = reports.flatMap((r) => r.turns.slice(skip)).map((t) => recordings[t.recording].transcript);
    let errors = 0;
    let words = 0;
    ts.forEach((t, i) => {
      const w = wordErrorRate(said[i], t?.text ?? '');
      errors += w.errors;
      words += w.words;
    });
    return words ? (100 * errors) / words : NaN;
  };
  const report = (label: string, r: Awaited<ReturnType<typeof runCallers>>, skip: number) => {
    const ts = answered(r.turns);
    log(
      `  ${label}: ${ts.length}/${r.asked} turns answered, WER of the finals ${werOf(r.turns, r.reports, skip).toFixed(1)} %, ${r.reports.reduce((a, x) => a + x.underruns, 0)} underruns ` +
        `(${gaps(r)}; ${loops(r)}) (${r.seconds.toFixed(0)} s)`,
    );
    for (const [name, v] of stepRows(ts)) log(`    ${name.padEnd(78)} ${v}`);
    return ts;
  };
  /** The largest lateness past play time and the largest gap between two arrivals (the leg sends ahead: a gap under the lead is not heard). */
  const gaps = (r: Awaited<ReturnType<typeof runCallers>>) =>
    `latest packet ${ms(Math.max(...r.reports.map((x) => x.maxLateMs)))} ms past its play time with a ${JITTER_BUFFER_MS} ms buffer, largest gap between arrivals ${ms(Math.max(...r.reports.map((x) => x.maxGapMs)))} ms`;
  /** Event-loop delay of the service's process and the callers' during a run: a gap either side of the line is heard as one. */
  const loops = (r: Awaited<ReturnType<typeof runCallers>>) => {
    const callers = r.reports.flatMap((x) => (x.loop ? [x.loop] : []));
    return `event-loop delay p99/max: service ${ms(r.serviceLoop.p99)}/${ms(r.serviceLoop.max)} ms, callers ${ms(Math.max(...callers.map((x) => x.p99)))}/${ms(Math.max(...callers.map((x) => x.max)))} ms`;
  };
  const order = (n: number, offset = 0) => [offset % recordings.length, ...Array.from({ length: n }, (_, i) => (offset + i) % recordings.length)];

  // ---- (a) The browser (direct WebRTC), one session: a warm-up turn, then each recording.
  const rssBefore = procMemory()?.rss ?? NaN;
  const a = await runCallers('browser', { kind: 'browser', orders: [order(s.turns)] }, 1);
  const single = report(`(a) browser (direct WebRTC), one session, ${s.turns} recordings`, a, 1);
  if (single.length < Math.ceil(s.turns / 2)) throw new Error(`only ${single.length} of ${s.turns} turns were answered`);
  const singleGoal = ended(single).map((t) => t.goal);
  const singleP50 = p(singleGoal, 50);

  // ---- (c) The SIP leg: a dial-out SIPp answers; this bench's phone speaks and listens on the call's RTP.
  let sipTurns: Turn[] = [];
  if (s.sipTurns) {
    const cRun = await runCallers('sip', { kind: 'phone', order: order(s.sipTurns, 3), sipPort, siteSecret: site.site_secret }, 1);
    sipTurns = report(`(c) the SIP leg (dial-out to SIPp, PCMU RTP), one call, ${s.sipTurns} recordings`, cRun, 1);
  }

  // ---- (d) N browser sessions at once (N = 1 is (a)).
  const levels = [{ n: 1, asked: a.asked, answered: single.length, p50: singleP50, p90: p(singleGoal, 90), sttP50: p(single.flatMap((t) => (t.steps ? [t.steps.stt] : [])), 50), underruns: a.reports[0].underruns, maxLateMs: a.reports[0].maxLateMs, maxGapMs: a.reports[0].maxGapMs, rssMb: ((procMemory()?.rss ?? NaN) - rssBefore) / 1e6, pass: a.reports[0].underruns === 0 }];
  for (const n of s.levels) {
    const before = procMemory()?.rss ?? NaN;
    const r = await runCallers(`level ${n}`, { kind: 'browser', orders: Array.from({ length: n }, (_, i) => order(s.levelTurns, 2 * i + 1).slice(1)) }, 0);
    const ts = answered(r.turns);
    const goal = ended(ts).map((t) => t.goal);
    const underruns = r.reports.reduce((x, y) => x + y.underruns, 0);
    const l = {
      n, asked: r.asked, answered: ts.length, p50: p(goal, 50), p90: p(goal, 90), sttP50: p(ts.flatMap((t) => (t.steps ? [t.steps.stt] : [])), 50), underruns,
      maxLateMs: Math.max(...r.reports.map((x) => x.maxLateMs)), maxGapMs: Math.max(...r.reports.map((x) => x.maxGapMs)), rssMb: ((procMemory()?.rss ?? NaN) - before) / 1e6, pass: false,
    };
    l.pass = underruns === 0 && l.answered === l.asked && l.p50 < 2 * singleP50;
    levels.push(l);
    log(
      `  (d) ${n} browser sessions at once: ${l.answered}/${l.asked} turns answered; goal figure p50 ${ms(l.p50)} ms, p90 ${ms(l.p90)} ms (${(l.p50 / singleP50).toFixed(2)}× the single session's; STT p50 ${ms(l.sttP50)} ms); ` +
        `${underruns} underruns (${gaps(r)}; ${loops(r)}); worker RSS ${l.rssMb >= 0 ? '+' : ''}${l.rssMb.toFixed(0)} MB → ${l.pass ? 'ok' : 'FAILS'} (${r.seconds.toFixed(0)} s)`,
    );
  }
  // ---- (b) The whisper baseline: the same recordings, whisper (VOICE_STT_MODEL base) for the finals (last: on a busy machine it is by far the longest).
  let whisperTurns: Turn[] = [];
  if (s.whisperTurns) {
    stt.current = whisper;
    const b = await runCallers('whisper', { kind: 'browser', orders: [order(s.whisperTurns)], turnTimeoutMs: WHISPER_TURN_TIMEOUT_MS }, 1);
    stt.current = shipped;
    whisperTurns = report(`(b) baseline: the same with whisper finals (VOICE_STT_MODEL base), ${s.whisperTurns} recordings`, b, 1);
  }

  const passing = levels.filter((l, i) => l.pass && levels.slice(0, i).every((x) => x.pass));
  const best = passing.at(-1)?.n ?? 0;

  const atMost = (name: string, value: number, limit: number): Check => ({ name, value, unit: 'ms', goal: `<= ${limit}`, pass: value <= limit });
  const checks: Check[] = [
    atMost('voice turn, browser: end of speech → first audio at the caller minus the model, p50', singleP50, GOAL_P50_MS),
    atMost('voice turn, browser: the same, p90', p(singleGoal, 90), GOAL_P90_MS),
    ...(sipTurns.length
      ? [atMost('voice turn, SIP leg: the same, p50', p(ended(sipTurns).map((t) => t.goal), 50), GOAL_P50_MS), atMost('voice turn, SIP leg: the same, p90', p(ended(sipTurns).map((t) => t.goal), 90), GOAL_P90_MS)]
      : []),
    { name: `voice sessions at once on ${os.cpus().length} cores (no underruns, turn p50 < 2× one session's)`, value: best, unit: 'sessions', goal: `>= ${CONCURRENCY_GOAL}`, pass: best >= CONCURRENCY_GOAL },
  ];
  const whisperP50 = p(ended(whisperTurns).map((t) => t.goal), 50);
  const comparisons = whisperTurns.length
    ? [
        compare(
          { name: 'voice turn (goal figure): shipped STT vs whisper finals, same recordings, same run', subject: 'shipped (turns/s)', baseline: 'whisper finals', subjectUnit: 'turns/s', baselineUnit: 'turns/s' },
          { subject: 1000 / singleP50, baseline: 1000 / whisperP50, target: 1, best: Math.min(...whisperTurns.map((t) => t.goal)) / Math.min(...singleGoal) },
        ),
      ]
    : [];
  const parts = (ts: Turn[]) =>
    (['vad', 'stt', 'actor', 'tts', 'transport'] as const).map((k) => `${k === 'actor' ? 'actor' : k.toUpperCase()} ${ms(p(ts.flatMap((t) => (t.steps ? [t.steps[k]] : [])), 50))}`).join(', ');
  const headlines = [
    `voice turn, browser (${singleGoal.length} turns over real recordings that end a sentence, of ${single.length}): end of speech → first audio at the caller minus the model's ${own.firstClauseMs} ms p50 ${ms(singleP50)} ms, p90 ${ms(p(singleGoal, 90))} ms (p50 parts: ${parts(single)} ms)` +
      (whisperTurns.length ? `; with whisper finals p50 ${ms(whisperP50)} ms, p90 ${ms(p(whisperTurns.map((t) => t.goal), 90))} ms (${(whisperP50 / singleP50).toFixed(1)}× slower)` : ''),
    ...(sipTurns.length ? [`voice turn, SIP leg (${ended(sipTurns).length} turns that end a sentence, of ${sipTurns.length}): p50 ${ms(p(ended(sipTurns).map((t) => t.goal), 50))} ms, p90 ${ms(p(ended(sipTurns).map((t) => t.goal), 90))} ms (p50 parts: ${parts(sipTurns)} ms)`] : []),
    `voice concurrency: ${levels.map((l) => `N=${l.n} p50 ${ms(l.p50)} ms, ${l.underruns} underruns${l.pass ? '' : ' FAILS'}`).join('; ')} → largest N passing: ${best}`,
  ];
  const pcts = (ts: Turn[]) => Object.fromEntries([50, 90].map((q) => [`p${q}`, { e2e: round1(p(ts.map((t) => t.e2e), q)), goal: round1(p(ts.map((t) => t.goal), q)) }]));
  return {
    section: 'voice',
    description:
      'end of the caller\'s speech → first agent audio at the caller, the fake model\'s own time to its first clause taken out, by step, over real recordings: (a) a browser (direct WebRTC), (b) the same with whisper finals, (c) a SIP call, (d) N browser sessions at once',
    settings: { ...s, silenceMs: c.config.VOICE_SILENCE_MS, jitterBufferMs: JITTER_BUFFER_MS, sendAheadMs: SEND_AHEAD_MS, reply: REPLY, chunkChars: CHUNK_CHARS, modelOwn: own, loadAverage: os.loadavg().map(round1) },
    comparisons,
    checks,
    headlines,
    details: { browser: { turns: single, ...pcts(single) }, whisper: { turns: whisperTurns, ...pcts(whisperTurns) }, sip: { turns: sipTurns, ...pcts(sipTurns) }, levels, largestPassingN: best },
  };
}

export const benchVoice = section(module, 'voice', measure, { env: { LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' }, roles: { callers } });
