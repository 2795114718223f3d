import { execFileSync } from 'node:child_process';
import { dbfs, wavToMono } from '../../lib/audio/audio';
import { FRAME_SAMPLES, MEDIA_RATE } from '../../domain/ports/voice';
import { Vad, type VadEvent } from '../../lib/audio/vad';
import path from 'node:path';
import { SileroModel, SileroVad } from '../../lib/audio/silero-vad';
import { recording } from './recordings';

/** espeak-ng's speech at 8 kHz mono, as a caller's audio arrives. */
const say = (text: string) => wavToMono(execFileSync('espeak-ng', ['--stdout', '-v', 'en-us', '-s', '160'], { input: text }), MEDIA_RATE);
const silence = (ms: number) => new Int16Array((MEDIA_RATE * ms) / 1000);

/** White noise added to the signal at `level` dBFS (a line's hiss); seeded, so runs repeat. */
function withNoise(signal: Int16Array, level: number, seed = 1): Int16Array {
  const amplitude = 32768 * 10 ** (level / 20) * Math.sqrt(3); // uniform noise: RMS = amplitude / √3
  let state = seed;
  const out = new Int16Array(signal.length);
  for (let i = 0; i < signal.length; i++) {
    state = (state * 1664525 + 1013904223) >>> 0;
    out[i] = Math.max(-32768, Math.min(32767, Math.round(signal[i] + amplitude * (state / 2 ** 32 * 2 - 1))));
  }
  return out;
}

function concat(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Where the clean speech really is: first and last 20 ms frame louder than -40 dBFS. */
function speechBounds(clean: Int16Array): { start: number; end: number } {
  let start = -1;
  let end = -1;
  for (let i = 0; i + FRAME_SAMPLES <= clean.length; i += FRAME_SAMPLES) {
    if (dbfs(clean.subarray(i, i + FRAME_SAMPLES)) > -40) {
      if (start < 0) start = i;
      end = i + FRAME_SAMPLES;
    }
  }
  return { start, end };
}

/** Feeds the audio 20 ms at a time, as a leg delivers it; each event with the sample at which it was emitted. */
function run(vad: Vad, audio: Int16Array, frame = FRAME_SAMPLES): Array<VadEvent & { emittedAt: number }> {
  const out: Array<VadEvent & { emittedAt: number }> = [];
  for (let i = 0; i < audio.length; i += frame) {
    for (const e of vad.push(audio.subarray(i, i + frame))) out.push({ ...e, emittedAt: vad.samplesSeen });
  }
  return out;
}

const ms = (samples: number) => (samples * 1000) / MEDIA_RATE;

describe('Vad', () => {
  const utterance = say('What are your opening hours on Sunday?');
  const lead = 1000;

  test('one utterance padded with a second of silence on each side, under -60 dBFS hiss: exactly one start at the speech onset (decided within 100 ms) and one end 500 ms after it stops', () => {
    const clean = concat(silence(lead), utterance, silence(1000));
    const bounds = speechBounds(clean);
    const events = run(new Vad(), withNoise(clean, -60));
    expect(events.map((e) => e.type)).toEqual(['speech_start', 'speech_end']);
    const [start, end] = events;
    expect(Math.abs(ms(start.sample - bounds.start))).toBeLessThanOrEqual(40);
    // Decided after 80 ms of voiced frames: between 60 and 100 ms after the onset.
    expect(ms(start.emittedAt - start.sample)).toBeGreaterThanOrEqual(60);
    expect(ms(start.emittedAt - start.sample)).toBeLessThanOrEqual(100);
    expect(Math.abs(ms(end.sample - bounds.end))).toBeLessThanOrEqual(60);
    expect(ms(end.emittedAt - end.sample)).toBeCloseTo(500, -1);
    expect(end).toMatchObject({ durationMs: ms(end.sample - start.sample) });
  });

  test('two utterances a second apart are two turns, each ended by its own 500 ms of silence', () => {
    const second = say('I would like to book a table.');
    const clean = concat(silence(500), utterance, silence(1000), second, silence(800));
    const events = run(new Vad(), withNoise(clean, -60, 7));
    expect(events.map((e) => e.type)).toEqual(['speech_start', 'speech_end', 'speech_start', 'speech_end']);
    const secondOnset = silence(500).length + utterance.length + silence(1000).length + speechBounds(second).start;
    expect(Math.abs(ms(events[2].sample - secondOnset))).toBeLessThanOrEqual(40);
  });

  test('silenceMs is configurable: with 1500 ms, the same two utterances a second apart are one turn', () => {
    const second = say('I would like to book a table.');
    const events = run(new Vad({ silenceMs: 1500 }), withNoise(concat(silence(500), utterance, silence(1000), second, silence(1600)), -60, 3));
    expect(events.map((e) => e.type)).toEqual(['speech_start', 'speech_end']);
  });

  test('steady loud noise (-35 dBFS) alone is never a turn; espeak speech over the same noise still is one turn', () => {
    const noisy = withNoise(concat(silence(3000), utterance, silence(1000)), -35, 5);
    const quietStart = run(new Vad(), noisy.subarray(0, MEDIA_RATE * 3));
    expect(quietStart).toEqual([]);
    expect(run(new Vad(), noisy).map((e) => e.type)).toEqual(['speech_start', 'speech_end']);
  });

  test('a 40 ms click is shorter than startMs: no turn', () => {
    const click = Int16Array.from({ length: (MEDIA_RATE * 40) / 1000 }, (_, i) => Math.round(12_000 * Math.sin(i)));
    expect(run(new Vad(), withNoise(concat(silence(500), click, silence(1000)), -60))).toEqual([]);
  });

  test('frames of another size (10 ms) are re-cut into 20 ms frames: the same events at the same samples', () => {
    const audio = withNoise(concat(silence(lead), utterance, silence(1000)), -60);
    const strip = (es: Array<VadEvent & { emittedAt: number }>) => es.map(({ emittedAt: _, ...e }) => e);
    expect(strip(run(new Vad(), audio, 80))).toEqual(strip(run(new Vad(), audio)));
  });

  test('during a turn, trailingSilenceMs counts the quiet since the last voiced frame and lastVoicedSample is where the end event will put it', () => {
    const vad = new Vad();
    const frames = withNoise(concat(silence(lead), utterance, silence(1000)), -60);
    const seen: Array<{ quiet: number; last: number; inSpeech: boolean }> = [];
    let end: VadEvent | undefined;
    for (let at = 0; at < frames.length; at += FRAME_SAMPLES) {
      const events = vad.push(frames.subarray(at, at + FRAME_SAMPLES));
      end ??= events.find((e) => e.type === 'speech_end');
      if (!end) seen.push({ quiet: vad.trailingSilenceMs, last: vad.lastVoicedSample, inSpeech: vad.inSpeech });
    }
    expect(end).toBeDefined();
    // Before the turn: 0. Just before the end: about the silence window, measured from the end event's sample.
    expect(seen[0]).toMatchObject({ quiet: 0, inSpeech: false });
    const last = seen.at(-1)!;
    expect(last.inSpeech).toBe(true);
    expect(last.last).toBe(end!.sample);
    expect(last.quiet).toBeGreaterThanOrEqual(460);
    expect(last.quiet).toBeLessThan(500);
    // The quiet grows frame by frame from the last voiced frame (20 ms a frame), never jumping past the window.
    const tail = seen.filter((s) => s.last === end!.sample && s.quiet > 0).map((s) => s.quiet);
    tail.forEach((q, i) => i && expect(q - tail[i - 1]).toBeCloseTo(20, 5));
    expect(vad.trailingSilenceMs).toBe(0);
  });

  test('finish() ends a turn cut off mid-speech (the caller hung up while talking); nothing when silent', () => {
    const vad = new Vad();
    const events = run(vad, withNoise(concat(silence(500), utterance), -60));
    expect(events.map((e) => e.type)).toEqual(['speech_start']);
    expect(vad.finish()).toEqual([expect.objectContaining({ type: 'speech_end' })]);
    expect(vad.inSpeech).toBe(false);
    expect(vad.finish()).toEqual([]);
  });
});

describe('SileroVad (Silero VAD v5 at 8 kHz, the shared model in its thread)', () => {
  const MODELS_DIR = path.resolve(process.env.CONCIERGE_MODELS_DIR ?? path.join(__dirname, '../../.data/models'));
  let model: SileroModel;
  beforeAll(async () => {
    model = await SileroModel.load(path.join(MODELS_DIR, 'silero-vad', 'silero_vad.onnx'));
  });
  afterAll(() => SileroModel.unloadAll());

  const runSilero = async (vad: SileroVad, audio: Int16Array, frame = FRAME_SAMPLES) => {
    const out: Array<VadEvent & { emittedAt: number }> = [];
    for (let i = 0; i < audio.length; i += frame) for (const e of await vad.push(audio.subarray(i, i + frame))) out.push({ ...e, emittedAt: vad.samplesSeen });
    return out;
  };

  test('a recorded sentence under -45 dBFS hiss is one turn from its onset, ended 250 ms after its last voiced window; loud white noise alone (-30 dBFS) is none', async () => {
    const speech = recording('librivox/sense_and_sensibility_01_austen_64kb-0930');
    const events = await runSilero(new SileroVad(model), withNoise(concat(silence(1000), speech, silence(1000)), -45));
    expect(events.map((e) => e.type)).toEqual(['speech_start', 'speech_end']);
    expect(ms(events[0].sample)).toBeGreaterThan(1000);
    expect(ms(events[0].sample)).toBeLessThan(1000 + ms(speech.length) / 4);
    expect(ms(events[1].emittedAt - events[1].sample)).toBeCloseTo(256, -1);
    expect(await runSilero(new SileroVad(model), withNoise(silence(3000), -30, 9))).toEqual([]);
  });

  test('two sessions share the model, each with its own state: interleaved, they decide as each would alone; 10 ms frames give the same events', async () => {
    const a = withNoise(concat(silence(500), recording('cards/003'), silence(800)), -50, 2);
    const b = withNoise(concat(silence(900), recording('cards/001'), silence(800)), -50, 4);
    const alone = [await runSilero(new SileroVad(model), a), await runSilero(new SileroVad(model), b)];
    const [va, vb] = [new SileroVad(model), new SileroVad(model)];
    const both: VadEvent[][] = [[], []];
    for (let i = 0; i < Math.max(a.length, b.length); i += FRAME_SAMPLES) {
      const [ea, eb] = await Promise.all([va.push(a.subarray(i, i + FRAME_SAMPLES)), vb.push(b.subarray(i, i + FRAME_SAMPLES))]);
      both[0].push(...ea);
      both[1].push(...eb);
    }
    const strip = (es: Array<VadEvent & { emittedAt?: number }>) => es.map(({ emittedAt: _, ...e }) => e);
    expect(both).toEqual(alone.map(strip));
    expect(alone[0].map((e) => e.type)).toEqual(['speech_start', 'speech_end']);
    expect(strip(await runSilero(new SileroVad(model), a, 80))).toEqual(strip(alone[0]));
  });
});
