// The speech threads upsample a call's 8 kHz turn themselves (lib/audio/audio.ts UPSAMPLE_SOURCE), and check its
// loudness and trim it there (PEAK_WINDOW_SOURCE, TRIM_SILENCE_SOURCE). The main thread's upsample, peakWindowDbfs
// and trimSilence are defined from the same sources (lib/process/plain-source.ts); what is checked here is what
// crosses to a thread (the transferred turn, the filter's plan) and the models' answers: a model must hear the same
// turn either way, bit for bit.
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { upsample, upsamplePlan, UPSAMPLE_SOURCE } from '../../lib/audio/audio';
import { SmartTurn } from '../../lib/audio/smart-turn';
import { PEAK_WINDOW_SOURCE, padded, peakWindowDbfs } from '../../providers/speech/whisper';
import { MoonshineTranscriber, TRIM_SILENCE_SOURCE, trimSilence } from '../../providers/speech/moonshine';
import { EmbeddedSpeechRecognizer } from '../../providers/speech/stt';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { recording } from './recordings';

const MODELS_DIR = path.resolve(process.env.CONCIERGE_MODELS_DIR ?? path.join(__dirname, '../../.data/models'));
const SENTENCE = 'librivox/sense_and_sensibility_01_austen_64kb-0930';
/** The 300 ms of silence EmbeddedSpeechRecognizer puts on each side of a turn, at 16 kHz. */
const PAD = 4800;

/** The three sources run in a worker thread of their own, as the model threads run them; the pcm's buffer is transferred. */
function inThread(pcm: Int16Array<ArrayBuffer>): Promise<{ upsampled: Float32Array; level: number; trim: { start: number; length: number } }> {
  const worker = new Worker(
    `${UPSAMPLE_SOURCE}\n${PEAK_WINDOW_SOURCE}\n${TRIM_SILENCE_SOURCE}\n` +
      String.raw`
const { parentPort } = require('node:worker_threads');
parentPort.once('message', ({ pcm, plan, pad }) => {
  const upsampled = upsampleWithPlan(pcm, plan, pad, pad);
  const trimmed = trimSilence(upsampled);
  parentPort.postMessage({ upsampled, level: peakWindowDbfs(upsampled), trim: { start: trimmed.byteOffset / 4, length: trimmed.length } });
});`,
    { eval: true },
  );
  return new Promise((resolve, reject) => {
    worker.once('message', (m) => {
      resolve(m);
      void worker.terminate();
    });
    worker.once('error', reject);
    worker.postMessage({ pcm, plan: upsamplePlan(2), pad: PAD }, [pcm.buffer]);
  });
}

const bytes = (x: Float32Array) => Buffer.from(x.buffer, x.byteOffset, x.byteLength);

describe('the 8 kHz turn upsampled in a speech thread', () => {
  afterAll(async () => {
    await SmartTurn.unloadAll();
    MoonshineTranscriber.unloadAll();
  });

  test('a recorded sentence upsampled, padded, measured and trimmed in a worker thread is bit for bit what upsample, peakWindowDbfs and trimSilence give', async () => {
    const pcm = recording(SENTENCE);
    expect(pcm.length).toBeGreaterThan(MEDIA_RATE * 3);
    const expected = padded(upsample(pcm, 2), PAD);
    const got = await inThread(pcm.slice());
    // (Its class is the outer realm's: Jest runs the test in a context of its own.)
    expect(Object.prototype.toString.call(got.upsampled)).toBe('[object Float32Array]');
    expect(got.upsampled.length).toBe(pcm.length * 2 + 2 * PAD);
    expect(bytes(got.upsampled).equals(bytes(expected))).toBe(true);
    expect(got.level).toBe(peakWindowDbfs(expected));
    const trimmed = trimSilence(expected);
    expect(got.trim).toEqual({ start: trimmed.byteOffset / 4, length: trimmed.length });
    expect(trimmed.length).toBeGreaterThan(0);
  });

  test('Smart Turn: predict8k on the 8 kHz recording gives exactly the probability of predict(upsample(…, 2)), and leaves the caller its samples', async () => {
    const smart = SmartTurn.for(path.join(MODELS_DIR, 'smart-turn', 'smart-turn-v3.2-cpu.onnx'));
    if (!smart) throw new Error(`Smart Turn missing under ${MODELS_DIR}: run npm run models:fetch`);
    const pcm = recording(SENTENCE);
    const before = pcm.slice();
    const main = await smart.predict(upsample(pcm, 2));
    const threaded = await smart.predict8k(pcm);
    expect(threaded.probability).toBe(main.probability);
    expect(pcm).toEqual(before);
  });

  test('Moonshine hears the same words from the 8 kHz turn (upsampled in its thread) as from the turn upsampled on the main thread; the caller keeps its samples', async () => {
    const moonshine = new MoonshineTranscriber({ modelDir: path.join(MODELS_DIR, 'moonshine', 'base-en'), maxSeconds: 20 });
    const pcm = recording(SENTENCE);
    const before = pcm.slice();
    const main = await moonshine.transcribeSamples(padded(upsample(pcm, 2), PAD));
    const threaded = await new EmbeddedSpeechRecognizer(moonshine, 'en').transcribe(pcm);
    expect(main.text.length).toBeGreaterThan(10);
    expect(threaded).toBe(main.text);
    expect(pcm).toEqual(before);
  });
});
