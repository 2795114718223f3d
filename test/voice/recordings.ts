// Real read speech for the turn-taking tests: Debian's pocketsphinx-testdata (BSD-style licence), 16 kHz recordings
// of people reading, with their transcripts. Taken from /usr/share/pocketsphinx/test/data when the package is
// installed (npm run setup installs it), else fetched once with `apt-get download` and unpacked with `dpkg -x` into
// .data/test/pocketsphinx-testdata. Nothing of it is committed.
import fs from 'node:fs';
import path from 'node:path';
import { pocketsphinxData } from '../../dev/data/pocketsphinx';
import { wavToMono } from '../../lib/audio/audio';

const CACHE = path.resolve(__dirname, '..', '..', '.data', 'test', 'pocketsphinx-testdata');

function dataDir(): string {
  return pocketsphinxData(CACHE, 'these tests');
}

/** A recording (`librivox/sense_and_sensibility_01_austen_64kb-0930`, `cards/005`) at 8 kHz, the leg's rate. */
export function recording(name: string): Int16Array {
  return wavToMono(fs.readFileSync(path.join(dataDir(), `${name}.wav`)), 8000);
}

/** Where the quietest 60 ms between `fromMs` and `toMs` of the recording is: a gap between two words, in samples. */
export function wordGap(pcm: Int16Array, fromMs: number, toMs: number): number {
  const frame = 160;
  let best = -1;
  let bestLevel = Infinity;
  for (let i = (fromMs * 8) / frame; i < (toMs * 8) / frame - 2; i++) {
    let s = 0;
    for (let j = i * frame; j < (i + 3) * frame; j++) s += pcm[j] * pcm[j];
    if (s < bestLevel) {
      bestLevel = s;
      best = i + 1;
    }
  }
  return best * frame + frame / 2;
}

export const silence = (ms: number) => new Int16Array((8000 * ms) / 1000);

export function concat(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
