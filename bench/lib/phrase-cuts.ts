// The word error rate of phrases cut without a pause (domain/voice/agent.ts cutPhrase) against the whole sentence
// transcribed at once, on the five librivox sentences of pocketsphinx-testdata, for a few cut rules: the cuts are
// simulated at the agent's partial ticks (every 900 ms once 3 s are not in a phrase, in the last 1.5 s short of the
// last 200 ms). Run: node --import tsx bench/lib/phrase-cuts.ts (Moonshine base from npm run models:fetch).
import path from 'node:path';
import { concatFrames, quietestRun } from '../../lib/audio/audio';
import { MoonshineTranscriber } from '../../providers/speech/moonshine';
import { EmbeddedSpeechRecognizer } from '../../providers/speech/stt';
import { joinPhrases } from '../../domain/voice/agent';
import { realRecordings, wordErrorRate } from './voice-recordings';

async function main() {
  const moon = new MoonshineTranscriber({ modelDir: path.resolve(__dirname, '../../.data/models/moonshine/base-en'), maxSeconds: 20 });
  const stt = new EmbeddedSpeechRecognizer(moon, 'en');
  const configs = [[2, 0.3], [3, 0.2], [3, 0.12], [4, 0.15]] as const;
  const totals = new Map<string, { e: number; w: number; cuts: number }>();
  for (const { name, transcript: said, samples: pcm } of realRecordings().filter((r) => r.name.startsWith('librivox'))) {
    // Half a second before the speech, as the agent's preroll gives it.
    const pre = new Int16Array(4000);
    const all = new Int16Array(pre.length + pcm.length); all.set(pcm, pre.length);
    const frames: Int16Array[] = [];
    for (let i = 0; i + 160 <= all.length; i += 160) frames.push(all.subarray(i, i + 160));
    const whole = await stt.transcribe(all);
    const w0 = wordErrorRate(said, whole);
    const k0 = totals.get('whole') ?? { e: 0, w: 0, cuts: 0 }; k0.e += w0.errors; k0.w += w0.words; totals.set('whole', k0);
    for (const [width, ratio] of configs) {
      let phraseEnd = 0; const cuts: number[] = [];
      for (let t = 900; t < frames.length * 20; t += 900) {
        const len = t / 20;
        if ((len - phraseEnd) * 20 < 3000) continue;
        const from = Math.max(phraseEnd + 50, len - 75);
        const g = quietestRun(frames, from, len - 10, width);
        if (g && g.ratio <= ratio) { cuts.push(g.at); phraseEnd = g.at; }
      }
      const bounds = [0, ...cuts, frames.length];
      const parts = [];
      for (let i = 0; i + 1 < bounds.length; i++) parts.push({ text: await stt.transcribe(concatFrames(frames.slice(bounds[i], bounds[i + 1]))), midSentence: i + 1 < bounds.length - 1 });
      const text = joinPhrases(parts);
      const w = wordErrorRate(said, text);
      const key = `w${width} r${ratio}`;
      const k = totals.get(key) ?? { e: 0, w: 0, cuts: 0 }; k.e += w.errors; k.w += w.words; k.cuts += cuts.length; totals.set(key, k);
      console.log(name.slice(-4), key, 'cuts', cuts.map((c) => c * 20 - 500), w.errors, '|', text);
    }
    console.log(name.slice(-4), 'whole', w0.errors, '|', whole);
  }
  for (const [k, v] of totals) console.log(k, 'WER', ((100 * v.e) / v.w).toFixed(1), '% cuts', v.cuts);
  await MoonshineTranscriber.unloadAll();
}
void main();
