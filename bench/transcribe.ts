// What this measures and how to read it: docs/benchmarks.md#transcribe
import fs from 'node:fs';
import path from 'node:path';
import { LocalWhisperTranscriber } from '../providers/speech/whisper';
import { MoonshineTranscriber } from '../providers/speech/moonshine';
import { EmbeddedSpeechRecognizer } from '../providers/speech/stt';
import { speechDir, spokenRecordings, wordErrorRate } from '../dev/fakes/speech';
import { speech8k, VISITOR_QUESTIONS } from '../dev/fakes/voice-browser';
import { envNumber } from './lib/load';
import { benchModelsDir } from './lib/setup';
import { below, comparison, mean, procMemory, resetHwm } from './lib/stats';
import type { Comparison, Result } from './lib/types';

const GOAL_RTF = 1;
/** Moonshine must cost at most a quarter of whisper base's CPU per voice turn to be worth its memory next to it. */
const GOAL_MOONSHINE_RATIO = 4;

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
    const voice = await voiceTurnCpu(log, rounds, threads, modelPath, dir);

    const long = byTarget[1];
    // The first transcription of the run loads the model (the warm-up's voice note).
    const firstMs = samples[0].decodeMs + samples[0].transcribeMs;
    const checks = [below(`transcribe: real-time factor, ${long.target}`, long.rtf, '×', GOAL_RTF)];
    return {
      section: 'transcribe',
      description: 'Embedded speech-to-text (whisper.cpp base, worker thread) on espeak-ng speech: real-time factor, word error rate, resident memory',
      settings: { rounds, sentences, threads, language, modelPath, moonshineDir: voice.moonshineDir },
      checks,
      comparisons: [voice.comparison],
      headlines: [
        voice.headline,
        ...byTarget.map((t) => `transcribe: ${t.target}: ${t.audioSeconds.toFixed(1)} s of audio in ${t.seconds.toFixed(2)} s → RTF ${t.rtf.toFixed(2)} (best ${t.bestRtf.toFixed(2)}), WER ${(t.wer * 100).toFixed(1)}%`),
        `transcribe: first voice note, model load included: ${(firstMs / 1000).toFixed(2)} s; RSS ${rssBefore.toFixed(0)} MB before the model, ${rssLoaded.toFixed(0)} MB loaded (peak ${rssPeak.toFixed(0)} MB), ${rssUnloaded.toFixed(0)} MB after unloading`,
      ],
      details: { voiceTurns: voice.details, samples, byTarget, rssMb: { before: rssBefore, loaded: rssLoaded, peak: rssPeak, unloaded: rssUnloaded }, firstMs, heapMb: mb(process.memoryUsage().heapUsed) },
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The voice agent's turns (8 kHz questions, as a call carries them) through the recognizer
 * the worker builds, on Moonshine base-en (the default for English callers) and on whisper
 * base (before it), the two interleaved, their order alternating per round; the warm-up
 * round loads both. CPU per utterance is process.cpuUsage() around one transcription: the
 * model threads are this process's, and nothing else runs here meanwhile.
 */
async function voiceTurnCpu(log: (line: string) => void, rounds: number, threads: number, modelPath: string, dir: string) {
  const moonshineDir = path.join(benchModelsDir(), 'moonshine', 'base-en');
  const models = {
    moonshine: new EmbeddedSpeechRecognizer(new MoonshineTranscriber({ modelDir: moonshineDir, maxSeconds: 600 })),
    'whisper base': new EmbeddedSpeechRecognizer(new LocalWhisperTranscriber({ modelPath, maxSeconds: 600, threads, language: 'en' }), 'en'),
  };
  const utterances = VISITOR_QUESTIONS.map((text) => ({ text, pcm: speech8k(text, dir) }));
  const samples: Array<{ model: keyof typeof models; round: number; cpuMs: number; wallMs: number; audioSeconds: number; wer: number }> = [];
  for (let round = 0; round <= rounds; round++) {
    const order = (Object.keys(models) as Array<keyof typeof models>)[round % 2 ? 'reverse' : 'slice']();
    for (const model of order) {
      for (const u of utterances) {
        const cpu = process.cpuUsage();
        const t0 = performance.now();
        const got = await models[model].transcribe(u.pcm);
        const used = process.cpuUsage(cpu);
        samples.push({ model, round, cpuMs: (used.user + used.system) / 1000, wallMs: performance.now() - t0, audioSeconds: u.pcm.length / 8000, wer: wordErrorRate(u.text, got) });
      }
      const of = samples.filter((x) => x.model === model && x.round === round);
      log(`  ${round === 0 ? 'warm-up' : `round ${round}`}: voice turns on ${model}: ${of.length} utterances, CPU ${mean(of.map((x) => x.cpuMs)).toFixed(0)} ms each${round === 0 ? ' (model load included)' : ''}, WER ${(mean(of.map((x) => x.wer)) * 100).toFixed(1)}%`);
    }
  }
  MoonshineTranscriber.unloadAll();
  LocalWhisperTranscriber.unloadAll();
  const measured = (model: keyof typeof models, round?: number) => samples.filter((x) => x.model === model && x.round > 0 && (round === undefined || x.round === round));
  const cpu = (model: keyof typeof models, round?: number) => mean(measured(model, round).map((x) => x.cpuMs));
  const [moon, whisper] = [cpu('moonshine'), cpu('whisper base')];
  const perRound = Array.from({ length: rounds }, (_, i) => cpu('whisper base', i + 1) / cpu('moonshine', i + 1));
  const result: Comparison = comparison(
    { name: 'voice turn speech-to-text: CPU per utterance, Moonshine base-en vs whisper base', subject: 'moonshine', baseline: 'whisper base', subjectUnit: 'utterances/CPU-min', baselineUnit: 'utterances/CPU-min' },
    { subject: 60_000 / moon, baseline: 60_000 / whisper, target: GOAL_MOONSHINE_RATIO, best: Math.min(...measured('whisper base').map((x) => x.cpuMs)) / Math.min(...measured('moonshine').map((x) => x.cpuMs)), rounds: perRound },
  );
  const wer = (model: keyof typeof models) => (mean(measured(model).map((x) => x.wer)) * 100).toFixed(1);
  const audio = mean(utterances.map((u) => u.pcm.length / 8000));
  return {
    moonshineDir,
    comparison: result,
    headline:
      `transcribe: voice turn (${utterances.length} questions, ${audio.toFixed(1)} s each at 8 kHz): CPU per utterance Moonshine ${moon.toFixed(0)} ms vs whisper base ${whisper.toFixed(0)} ms ` +
      `→ ${(whisper / moon).toFixed(1)}× less (WER ${wer('moonshine')}% vs ${wer('whisper base')}%)`,
    details: { samples, moonshineCpuMs: moon, whisperCpuMs: whisper, ratio: whisper / moon },
  };
}
