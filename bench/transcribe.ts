// What this measures and how to read it: docs/benchmarks.md#transcribe
import fs from 'node:fs';
import path from 'node:path';
import { LocalWhisperTranscriber } from '../providers/speech/whisper';
import { speechDir, spokenRecordings, wordErrorRate } from '../dev/fakes/speech';
import { envNumber } from './lib/load';
import { benchModelsDir } from './lib/setup';
import { below, mean, procMemory, resetHwm } from './lib/stats';
import type { Result } from './lib/types';

const GOAL_RTF = 1;

const mb = (bytes: number) => bytes / 1024 / 1024;
const vm = (field: 'VmRSS' | 'VmHWM') => mb(procMemory()?.[field === 'VmRSS' ? 'rss' : 'hwm'] ?? NaN);

export async function benchTranscribe(log: (line: string) => void): Promise<Result> {
  const rounds = envNumber('BENCH_ROUNDS', 3, 1);
  const sentences = envNumber('BENCH_TRANSCRIBE_SENTENCES', 8, 1);
  const threads = envNumber('TRANSCRIBE_THREADS', 2, 1);
  const language = process.env.TRANSCRIBE_LANGUAGE || 'auto';
  const modelPath = path.resolve(process.env.TRANSCRIBE_MODEL_PATH || path.join(benchModelsDir(), 'whisper', 'ggml-base.bin'));
  if (!fs.existsSync(modelPath)) throw new Error(`${modelPath} is missing: run npm run models:fetch`);

  const dir = speechDir();
  try {
    const { note, long: recording } = spokenRecordings(sentences, dir);

    LocalWhisperTranscriber.unloadAll();
    const stt = new LocalWhisperTranscriber({ modelPath, maxSeconds: 600, threads, language });
    await resetHwm();
    const rssBefore = vm('VmRSS');
    const samples: Array<{ target: string; round: number; audioSeconds: number; decodeMs: number; transcribeMs: number; loaded: boolean; rtf: number; wer: number }> = [];
    for (let round = 0; round <= rounds; round++) {
      for (const [target, { file, text }] of [['voice note (WebM/Opus)', note], [`recording of ${sentences} sentences (WAV)`, recording]] as const) {
        const { text: got, stats } = await stt.transcribeWithStats(file);
        const rtf = (stats.decodeMs + stats.transcribeMs) / 1000 / stats.audioSeconds;
        const wer = wordErrorRate(text, got);
        samples.push({ target, round, audioSeconds: stats.audioSeconds, decodeMs: stats.decodeMs, transcribeMs: stats.transcribeMs, loaded: stats.loaded, rtf, wer });
        log(
          `  ${round === 0 ? 'warm-up' : `round ${round}`}: ${target}: ${stats.audioSeconds.toFixed(1)} s of audio in ${((stats.decodeMs + stats.transcribeMs) / 1000).toFixed(2)} s ` +
            `(decode ${stats.decodeMs.toFixed(0)} ms${stats.loaded ? ', model load included' : ''}) → RTF ${rtf.toFixed(2)}, WER ${(wer * 100).toFixed(1)}%, RSS ${vm('VmRSS').toFixed(0)} MB`,
        );
      }
    }
    const rssLoaded = vm('VmRSS');
    const rssPeak = vm('VmHWM');
    LocalWhisperTranscriber.unloadAll();
    await new Promise((r) => setTimeout(r, 500));
    const rssUnloaded = vm('VmRSS');

    const measured = samples.filter((s) => s.round > 0);
    const byTarget = [...new Set(measured.map((s) => s.target))].map((target) => {
      const of = measured.filter((s) => s.target === target);
      const rtfs = of.map((s) => s.rtf);
      return { target, audioSeconds: of[0].audioSeconds, rtf: mean(rtfs), bestRtf: Math.min(...rtfs), wer: mean(of.map((s) => s.wer)), seconds: mean(of.map((s) => (s.decodeMs + s.transcribeMs) / 1000)) };
    });
    const long = byTarget[1];
    // The first transcription of the run loads the model (the warm-up's voice note).
    const firstMs = samples[0].decodeMs + samples[0].transcribeMs;
    const checks = [below(`transcribe: real-time factor, ${long.target}`, long.rtf, '×', GOAL_RTF)];
    return {
      section: 'transcribe',
      description: 'Embedded speech-to-text (whisper.cpp base, worker thread) on espeak-ng speech: real-time factor, word error rate, resident memory',
      settings: { rounds, sentences, threads, language, modelPath },
      checks,
      headlines: [
        ...byTarget.map((t) => `transcribe: ${t.target}: ${t.audioSeconds.toFixed(1)} s of audio in ${t.seconds.toFixed(2)} s → RTF ${t.rtf.toFixed(2)} (best ${t.bestRtf.toFixed(2)}), WER ${(t.wer * 100).toFixed(1)}%`),
        `transcribe: first voice note, model load included: ${(firstMs / 1000).toFixed(2)} s; RSS ${rssBefore.toFixed(0)} MB before the model, ${rssLoaded.toFixed(0)} MB loaded (peak ${rssPeak.toFixed(0)} MB), ${rssUnloaded.toFixed(0)} MB after unloading`,
      ],
      details: { samples, byTarget, rssMb: { before: rssBefore, loaded: rssLoaded, peak: rssPeak, unloaded: rssUnloaded }, firstMs, heapMb: mb(process.memoryUsage().heapUsed) },
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
