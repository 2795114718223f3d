/**
 * The natural voice's costs, for the voice bench (bench/voice.ts may call measureTts) or on
 * its own:
 *
 *   node --import tsx bench/lib/tts-piper.ts
 *
 * Piper (en_US-joe-medium, one intra-op thread, in its worker thread) against espeak-ng in
 * the same run, over the first clauses of typical replies: the first clause after start-up
 * (load and warm-up excluded, then reported apart), each clause's time to its 8 kHz audio
 * (p50, p90), the real-time factor (time / audio), and the process's CPU time per audio
 * second; and the phonemizer kept alive against an espeak-ng process per clause.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { EspeakSynthesizer, type SpeechSynthesizer } from '../../providers/speech/tts';
import { DEFAULT_PIPER_VOICE, piperVoicePath, PiperSynthesizer } from '../../providers/speech/piper';
import { EspeakPhonemizer } from '../../providers/speech/espeak-phonemes';
import { benchModelsDir } from './setup';

/** First clauses of replies, as the pipeline hands them to the synthesizer. */
export const CLAUSES = [
  'Sure.',
  'We are open from nine to five today.',
  'Your table for four is booked for eight tonight.',
  'I can help with that.',
  'Let me check the opening hours for Saturday.',
  'The invoice was sent to your email address yesterday.',
  'Thank you for calling, have a great day.',
  'Could you tell me your order number, please?',
];

export interface TtsFigures {
  engine: string;
  /** First clause after the synthesizer was ready (ms). */
  firstClauseMs: number;
  p50Ms: number;
  p90Ms: number;
  /** Wall time / audio time over all clauses. */
  rtf: number;
  /** Process CPU ms per second of audio. */
  cpuMsPerAudioSecond: number;
  audioSeconds: number;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};

async function measure(engine: string, tts: SpeechSynthesizer, rounds: number): Promise<TtsFigures> {
  const times: number[] = [];
  let audio = 0;
  let wall = 0;
  const cpu0 = process.cpuUsage();
  let first = -1;
  for (let r = 0; r < rounds; r++) {
    for (const clause of CLAUSES) {
      const t = performance.now();
      const pcm = await tts.synthesize(clause);
      const ms = performance.now() - t;
      if (first < 0) first = ms;
      times.push(ms);
      wall += ms;
      audio += pcm.length / MEDIA_RATE;
    }
  }
  const cpu = process.cpuUsage(cpu0);
  return {
    engine,
    firstClauseMs: Math.round(first),
    p50Ms: Math.round(pct(times, 0.5)),
    p90Ms: Math.round(pct(times, 0.9)),
    rtf: Number((wall / 1000 / audio).toFixed(3)),
    cpuMsPerAudioSecond: Math.round((cpu.user + cpu.system) / 1000 / audio),
    audioSeconds: Number(audio.toFixed(1)),
  };
}

/** The phonemes of every clause: the espeak-ng process kept alive, then one process per clause (ms per clause, p50). */
export async function measurePhonemizer(): Promise<{ keptAliveMs: number; spawnPerClauseMs: number }> {
  const p = new EspeakPhonemizer({ voice: 'en-us' });
  await p.phonemize('Warm up.');
  const kept: number[] = [];
  const spawned: number[] = [];
  for (const clause of [...CLAUSES, ...CLAUSES]) {
    let t = performance.now();
    await p.phonemize(clause);
    kept.push(performance.now() - t);
    t = performance.now();
    spawnSync('espeak-ng', ['-q', '--ipa', '-v', 'en-us'], { input: clause });
    spawned.push(performance.now() - t);
  }
  p.close();
  return { keptAliveMs: Number(pct(kept, 0.5).toFixed(1)), spawnPerClauseMs: Number(pct(spawned, 0.5).toFixed(1)) };
}

/** Piper and espeak-ng over CLAUSES (`rounds` times each), with the voice's load time. */
export async function measureTts(opts: { modelsDir?: string; rounds?: number } = {}): Promise<{ loadMs: number; piper: TtsFigures; espeak: TtsFigures; phonemes: Awaited<ReturnType<typeof measurePhonemizer>> }> {
  const rounds = opts.rounds ?? 2;
  const model = piperVoicePath(opts.modelsDir ?? benchModelsDir(), DEFAULT_PIPER_VOICE);
  const t = performance.now();
  const piper = new PiperSynthesizer({ model, log: (line) => console.warn(line) });
  await piper.ready();
  const loadMs = Math.round(performance.now() - t);
  try {
    const espeak = await measure('espeak-ng', new EspeakSynthesizer(), rounds);
    const p = await measure(`piper ${path.basename(model, '.onnx')}`, piper, rounds);
    return { loadMs, piper: p, espeak, phonemes: await measurePhonemizer() };
  } finally {
    piper.close();
    await PiperSynthesizer.unloadAll();
  }
}

if (require.main === module) {
  measureTts()
    .then((r) => {
      console.log(`piper load + warm-up: ${r.loadMs} ms`);
      for (const f of [r.espeak, r.piper]) {
        console.log(`${f.engine}: first clause ${f.firstClauseMs} ms, p50 ${f.p50Ms} ms, p90 ${f.p90Ms} ms, RTF ${f.rtf}, CPU ${f.cpuMsPerAudioSecond} ms per audio second (${f.audioSeconds} s of audio)`);
      }
      console.log(`phonemes per clause (p50): espeak-ng kept alive ${r.phonemes.keptAliveMs} ms, a process per clause ${r.phonemes.spawnPerClauseMs} ms`);
    })
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
