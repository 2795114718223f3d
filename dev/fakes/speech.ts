import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Real speech for the speech-to-text tests and the benchmark: Debian's espeak-ng speaks a
 * sentence into a WAV file, and ffmpeg re-encodes it as a browser records a voice note
 * (audio-only WebM with Opus, as Chrome's MediaRecorder writes it) and as messaging apps
 * send one (Ogg Opus). Both are installed by
 * npm run setup (scripts/setup.sh).
 */
export interface SpokenSample {
  text: string;
  wav: Buffer;
  webm: Buffer;
  /** Ogg Opus, as messaging apps send voice notes. */
  ogg: Buffer;
  /** Duration of the speech in seconds. */
  seconds: number;
}

export function speechDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-speech-'));
}

export function speak(text: string, dir: string = speechDir()): SpokenSample {
  const base = path.join(dir, `s${fs.readdirSync(dir).length}`);
  execFileSync('espeak-ng', ['-v', 'en-us', '-s', '150', '-w', `${base}.wav`, text]);
  for (const container of ['webm', 'ogg']) {
    execFileSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', `${base}.wav`, '-c:a', 'libopus', '-b:a', '32k', '-f', container, `${base}.${container}`]);
  }
  const wav = fs.readFileSync(`${base}.wav`);
  // espeak-ng writes 16-bit mono PCM at 22,050 Hz after a 44-byte header.
  return { text, wav, webm: fs.readFileSync(`${base}.webm`), ogg: fs.readFileSync(`${base}.ogg`), seconds: (wav.length - 44) / 2 / 22_050 };
}

/** `seconds` of digital silence, as audio-only WebM/Opus. */
export function silence(seconds: number, dir: string = speechDir()): Buffer {
  const file = path.join(dir, `silence-${seconds}.webm`);
  execFileSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'anullsrc=r=48000:cl=mono', '-t', String(seconds), '-c:a', 'libopus', '-f', 'webm', file]);
  return fs.readFileSync(file);
}

/** Half a second of a tone encoded with Opus, in WebM (as a browser's voice note) or Ogg. */
export function opusTone(container: 'webm' | 'ogg', dir: string = speechDir()): Buffer {
  const file = path.join(dir, `tone.${container}`);
  execFileSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '0.5', '-c:a', 'libopus', '-f', container, file]);
  return fs.readFileSync(file);
}

/** Several samples joined into one WAV (one long recording). */
export function joinWav(samples: SpokenSample[], dir: string = speechDir()): Buffer {
  const list = path.join(dir, 'list.txt');
  const files = samples.map((s, i) => {
    const f = path.join(dir, `part${i}.wav`);
    fs.writeFileSync(f, s.wav);
    return f;
  });
  fs.writeFileSync(list, files.map((f) => `file '${f}'`).join('\n'));
  const out = path.join(dir, 'joined.wav');
  execFileSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-f', 'concat', '-safe', '0', '-i', list, '-c', 'copy', out]);
  return fs.readFileSync(out);
}

const words = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9' ]+/g, ' ')
    .split(/\s+/)
    .filter(Boolean);

/** Word error rate: (substitutions + deletions + insertions) / reference words, by word-level edit distance. */
export function wordErrorRate(reference: string, hypothesis: string): number {
  const r = words(reference);
  const h = words(hypothesis);
  let prev = Array.from({ length: h.length + 1 }, (_, j) => j);
  for (let i = 1; i <= r.length; i++) {
    const row = [i];
    for (let j = 1; j <= h.length; j++) row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (r[i - 1] === h[j - 1] ? 0 : 1));
    prev = row;
  }
  return r.length ? prev[h.length] / r.length : h.length ? 1 : 0;
}

/** What customers say to a support line, one sentence each. */
export const CUSTOMER_SENTENCES = [
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

/** A voice note (the first sentence, WebM/Opus as Chrome records it) and a WAV recording of `sentences` sentences, as files in `dir` with their text. */
export function spokenRecordings(sentences: number, dir: string): { note: { file: string; text: string }; long: { file: string; text: string } } {
  const parts = Array.from({ length: sentences }, (_, i) => speak(CUSTOMER_SENTENCES[i % CUSTOMER_SENTENCES.length], dir));
  const note = { file: path.join(dir, 'note.webm'), text: parts[0].text };
  fs.writeFileSync(note.file, parts[0].webm);
  const long = { file: path.join(dir, 'long.wav'), text: parts.map((p) => p.text).join(' ') };
  fs.writeFileSync(long.file, joinWav(parts, dir));
  return { note, long };
}
