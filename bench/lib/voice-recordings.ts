// Real read speech for the voice bench: Debian's pocketsphinx-testdata (BSD-style licence), 16 kHz recordings of
// people reading, with their transcripts. Taken from /usr/share/pocketsphinx/test/data when the package is installed,
// else fetched once with `apt-get download` and unpacked with `dpkg -x` into .data/bench/pocketsphinx-testdata.
import fs from 'node:fs';
import path from 'node:path';
import { pocketsphinxData } from '../../dev/data/pocketsphinx';
import { pcmFromBytes, resample, wavToMono } from '../../lib/audio/audio';

const CACHE = path.resolve(__dirname, '..', '..', '.data', 'bench', 'pocketsphinx-testdata');

/** One recording: its words and its audio at 8 kHz (the leg's rate), trailing silence cut (see trimmed). */
export interface Recording {
  name: string;
  transcript: string;
  samples: Int16Array;
  /**
   * What follows the recording in the book when the reader stopped mid-sentence (a comma, a colon, a semicolon):
   * a caller who stops there has not finished, and the agent is right to wait (the hold for an unfinished turn), so
   * such a turn is not one of the goal figure's. Absent when the recording ends a sentence.
   */
  goesOn?: string;
}

/** The librivox recordings that stop mid-sentence, with what follows each in Sense and Sensibility, chapter 1. */
const GOES_ON: Record<string, string> = {
  'librivox/sense_and_sensibility_01_austen_64kb-0880': ', unless to be rather cold-hearted…',
  'librivox/sense_and_sensibility_01_austen_64kb-0890': ': but he was, in general, well respected…',
  'librivox/sense_and_sensibility_01_austen_64kb-0920': ':—he might even have been made amiable himself…',
  'librivox/sense_and_sensibility_01_austen_64kb-0930': '; for he was very young when he married…',
};

function dataDir(): string {
  return pocketsphinxData(CACHE, 'the voice bench');
}

/** Transcript lines `<s> words </s> (id)` by id. */
function transcripts(file: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = /^<s>\s*(.*?)\s*<\/s>\s*\(([^)]+)\)/.exec(line.trim());
    if (m) out.set(m[2], m[1].replace(/\s+/g, ' '));
  }
  return out;
}

/**
 * The audio up to its last voiced 20 ms frame (plus 40 ms), so the caller's "end of speech" is the end of what is
 * sent: a frame is voiced when its RMS is over 3 % of the loudest frame's (about -30 dB).
 */
export function trimmed(samples: Int16Array, rate = 8000): Int16Array {
  const frame = (rate * 20) / 1000;
  const rms: number[] = [];
  for (let i = 0; i + frame <= samples.length; i += frame) {
    let s = 0;
    for (let j = i; j < i + frame; j++) s += samples[j] * samples[j];
    rms.push(Math.sqrt(s / frame));
  }
  const loud = Math.max(...rms);
  let last = rms.length - 1;
  while (last > 0 && rms[last] < loud * 0.03) last--;
  return samples.slice(0, Math.min(samples.length, (last + 3) * frame));
}

/**
 * The 11 recordings with known words: 5 sentences of an audiobook (librivox, one speaker, 2.5–7 s), 5 spoken card
 * names (cards, 1–3.5 s) and "go forward ten meters" (goforward.raw, headerless 16 kHz).
 */
export function realRecordings(): Recording[] {
  const dir = dataDir();
  const out: Recording[] = [];
  for (const set of ['librivox', 'cards']) {
    const words = transcripts(path.join(dir, set, set === 'cards' ? 'cards.transcription' : 'transcription'));
    for (const [id, transcript] of words) {
      const file = path.join(dir, set, `${id}.wav`);
      const name = `${set}/${id}`;
      if (fs.existsSync(file)) out.push({ name, transcript, samples: trimmed(wavToMono(fs.readFileSync(file), 8000)), ...(GOES_ON[name] ? { goesOn: GOES_ON[name] } : {}) });
    }
  }
  const raw = path.join(dir, 'goforward.raw');
  if (fs.existsSync(raw)) out.push({ name: 'goforward', transcript: 'go forward ten meters', samples: trimmed(resample(pcmFromBytes(fs.readFileSync(raw)), 16000, 8000)) });
  if (out.length < 5) throw new Error(`only ${out.length} recordings found in ${dir}`);
  // Interleaved, so a short run of turns has both kinds.
  const books = out.filter((r) => r.name.startsWith('librivox'));
  const rest = out.filter((r) => !r.name.startsWith('librivox'));
  return Array.from({ length: Math.max(books.length, rest.length) }, (_, i) => [rest[i], books[i]]).flat().filter((r): r is Recording => r !== undefined);
}

const words = (s: string) =>
  s
    .toLowerCase()
    .replace(/\b10\b/g, 'ten')
    .replace(/[^a-z0-9' ]+/g, ' ')
    .split(/\s+/)
    .filter(Boolean);

/** Word error rate of `heard` against `said` (edit distance over the reference's words). */
export function wordErrorRate(said: string, heard: string): { errors: number; words: number } {
  const a = words(said);
  const b = words(heard);
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return { errors: prev[b.length], words: a.length };
}
