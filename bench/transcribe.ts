// The transcribe section: the embedded speech-to-text as a worker runs it
// (LocalWhisperTranscriber: ffmpeg decode, loudness check, whisper.cpp in a worker thread,
// the model of `npm run models:fetch`), on real speech spoken by espeak-ng:
//   - a voice note (one sentence, ~4 s, WebM/Opus as Chrome records it);
//   - a longer recording (BENCH_TRANSCRIBE_SENTENCES sentences, ~30 s, WAV).
// Real-time factor = processing time / audio duration (decode + transcription; the warm-up
// round, which loads the model, is reported apart), mean and best of the rounds (2 shared
// cores: the spread is large when other work runs), the word error rate against the spoken text, and the process's resident
// memory: before the model loads, after, and its high-water mark (VmHWM; the thread's
// memory is the process's). Goal: RTF < 1 (faster than real time) for the long recording.
//
// BENCH_TRANSCRIBE_SENTENCES (8), BENCH_ROUNDS (3), TRANSCRIBE_THREADS (2), TRANSCRIBE_LANGUAGE (auto),
// TRANSCRIBE_MODEL_PATH (<models dir>/whisper/ggml-base.bin).
import fs from 'node:fs';
import path from 'node:path';
import { LocalWhisperTranscriber } from '../providers/speech/whisper';
import { joinWav, speak, speechDir, wordErrorRate } from '../dev/fakes/speech';
import { envNumber } from './lib/load';
import { benchModelsDir } from './lib/setup';
import { procMemory, resetHwm } from './lib/stats';
import type { Check, Result } from './lib/types';

const GOAL_RTF = 1;
const SENTENCES = [
  'Hello, I would like to change the delivery address of my order.',
  'Please cancel my subscription and refund the last payment.',
  'My parcel arrived damaged and the box was open.',
  'Can you tell me when the store opens on Sunday morning?',
  'I forgot my password and the reset email never came.',
  'The invoice shows the wrong company name and tax number.',
  'We need twenty more chairs delivered before Friday.',
  'Is there a discount for students or for large orders?',
  'The app crashes every time I try to upload a photo.',
  'Thank you, that solved my problem, have a nice day.',
];

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
    const note = speak(SENTENCES[0], dir);
    const parts = Array.from({ length: sentences }, (_, i) => speak(SENTENCES[i % SENTENCES.length], dir));
    const longText = parts.map((p) => p.text).join(' ');
    const longFile = path.join(dir, 'long.wav');
    fs.writeFileSync(longFile, joinWav(parts, dir));
    const noteFile = path.join(dir, 'note.webm');
    fs.writeFileSync(noteFile, note.webm);

    LocalWhisperTranscriber.unloadAll();
    const stt = new LocalWhisperTranscriber({ modelPath, maxSeconds: 600, threads, language });
    await resetHwm();
    const rssBefore = vm('VmRSS');
    const samples: Array<{ target: string; round: number; audioSeconds: number; decodeMs: number; transcribeMs: number; loaded: boolean; rtf: number; wer: number }> = [];
    for (let round = 0; round <= rounds; round++) {
      for (const [target, file, text] of [
        ['voice note (WebM/Opus)', noteFile, note.text],
        [`recording of ${sentences} sentences (WAV)`, longFile, longText],
      ] as const) {
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
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const byTarget = [...new Set(measured.map((s) => s.target))].map((target) => {
      const of = measured.filter((s) => s.target === target);
      return {
        target,
        audioSeconds: of[0].audioSeconds,
        rtf: mean(of.map((s) => s.rtf)),
        bestRtf: Math.min(...of.map((s) => s.rtf)),
        wer: mean(of.map((s) => s.wer)),
        seconds: mean(of.map((s) => (s.decodeMs + s.transcribeMs) / 1000)),
      };
    });
    const long = byTarget[1];
    // The first transcription of the run loads the model (the warm-up's voice note).
    const firstMs = samples[0].decodeMs + samples[0].transcribeMs;
    const checks: Check[] = [{ name: `transcribe: real-time factor, ${long.target}`, value: long.rtf, unit: '×', goal: `< ${GOAL_RTF}`, pass: long.rtf < GOAL_RTF }];
    return {
      section: 'transcribe',
      description: 'Embedded speech-to-text (whisper.cpp base, worker thread) on espeak-ng speech: real-time factor, word error rate, resident memory',
      settings: { rounds, sentences, threads, language, modelPath },
      checks,
      headlines: [
        ...byTarget.map(
          (t) => `transcribe: ${t.target}: ${t.audioSeconds.toFixed(1)} s of audio in ${t.seconds.toFixed(2)} s → RTF ${t.rtf.toFixed(2)} (best ${t.bestRtf.toFixed(2)}), WER ${(t.wer * 100).toFixed(1)}%`,
        ),
        `transcribe: first voice note, model load included: ${(firstMs / 1000).toFixed(2)} s; RSS ${rssBefore.toFixed(0)} MB before the model, ${rssLoaded.toFixed(0)} MB loaded (peak ${rssPeak.toFixed(0)} MB), ${rssUnloaded.toFixed(0)} MB after unloading`,
      ],
      details: { samples, byTarget, rssMb: { before: rssBefore, loaded: rssLoaded, peak: rssPeak, unloaded: rssUnloaded }, firstMs, heapMb: mb(process.memoryUsage().heapUsed) },
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
