import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { configSchema, moonshineModelDir, whisperModelPath, whisperTinyEnModelPath, type Config } from '../../app/config';
import { MediaTooLong, TranscriberError } from '../../lib/extract';
import { LocalWhisperTranscriber } from '../../providers/speech/whisper';
import { MoonshineTranscriber } from '../../providers/speech/moonshine';
import { OpenAiTranscriber } from '../../providers/speech/openai-transcriber';
import { transcriberFromConfig } from '../../app/extractor';
import { decodeMulaw, encodeMulaw, int16ToFloat32, parseWav, resample, upsample, wavToMono } from '../../lib/audio/audio';
import { voiceSpeechModels } from '../../app/voice';
import { EmbeddedSpeechRecognizer, HttpSpeechRecognizer, speechRecognizerFor, type SpeechRecognizer } from '../../providers/speech/stt';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { CONVERTED_SOURCES, modelFilesPresent, MOONSHINE_MODEL_IDS, TINY_EN_WHISPER_MODEL } from '../../bin/fetch-models';
import { startFakeSpeechServer, type FakeSpeechServer } from '../support/fake-speech';

const MODELS_DIR = path.resolve(process.env.CONCIERGE_MODELS_DIR ?? path.join(__dirname, '../../.data/models'));
/** espeak-ng's speech brought down to the call's 8 kHz, as a caller's turn reaches the recognizer (no silence around it). */
const say = (text: string) => wavToMono(execFileSync('espeak-ng', ['--stdout', '-v', 'en-us', '-s', '150'], { input: text }), MEDIA_RATE);

describe('EmbeddedSpeechRecognizer on the embedded whisper.cpp (in memory)', () => {
  let recognizer: SpeechRecognizer;

  beforeAll(() => {
    const config: Config = { ...configSchema.parse({}), CONCIERGE_MODELS_DIR: MODELS_DIR, TRANSCRIBE_MAX_SECONDS: 20, TRANSCRIBE_LANGUAGE: 'en' };
    if (!fs.existsSync(whisperModelPath(config))) throw new Error(`${whisperModelPath(config)} is missing: run npm run models:fetch`);
    // The same wiring as the worker: the configured transcriber, wrapped for calls.
    recognizer = speechRecognizerFor(transcriberFromConfig(config))!;
    expect(recognizer).toBeInstanceOf(EmbeddedSpeechRecognizer);
  });
  afterAll(() => LocalWhisperTranscriber.unloadAll());

  test('"What are your opening hours" spoken at 8 kHz is transcribed with "opening hours"', async () => {
    const text = await recognizer.transcribe(say('What are your opening hours'));
    expect(text.toLowerCase()).toContain('opening hours');
  });

  test('the same speech after a G.711 μ-law line (PCMU out and back) still says "opening hours"', async () => {
    const overTheLine = decodeMulaw(encodeMulaw(say('What are your opening hours')));
    expect((await recognizer.transcribe(overTheLine)).toLowerCase()).toContain('opening hours');
  });

  test('silence is an empty transcript (found by its loudness, without the model inventing " you")', async () => {
    expect(await recognizer.transcribe(new Int16Array(MEDIA_RATE * 2))).toBe('');
  });

  test('a turn longer than TRANSCRIBE_MAX_SECONDS is refused as MediaTooLong before the model runs', async () => {
    await expect(recognizer.transcribe(new Int16Array(MEDIA_RATE * 21))).rejects.toBeInstanceOf(MediaTooLong);
  });
});

describe('the 8 kHz turn as the embedded models hear it (16 kHz)', () => {
  /** Level of `hz` in the samples (Goertzel), relative to a full-scale sine: 0 dB for one. */
  const levelDb = (x: Float32Array, rate: number, hz: number) => {
    const w = (2 * Math.PI * hz) / rate;
    let s1 = 0;
    let s2 = 0;
    for (const v of x) [s1, s2] = [v + 2 * Math.cos(w) * s1 - s2, s1];
    return 20 * Math.log10(Math.sqrt(s1 * s1 + s2 * s2 - 2 * Math.cos(w) * s1 * s2) / (x.length / 2));
  };
  const tone = Int16Array.from({ length: MEDIA_RATE }, (_, i) => Math.round(16384 * Math.sin((2 * Math.PI * 3000 * i) / MEDIA_RATE)));

  test('upsampling keeps a 3 kHz tone\'s level and adds no image of it at 5 kHz (linear interpolation leaves one 7 dB below it)', () => {
    const up = upsample(tone, 2);
    expect(up).toHaveLength(2 * MEDIA_RATE);
    expect(Math.abs(levelDb(up, 16_000, 3000) - levelDb(int16ToFloat32(tone), MEDIA_RATE, 3000))).toBeLessThan(1);
    expect(levelDb(up, 16_000, 3000) - levelDb(up, 16_000, 5000)).toBeGreaterThan(40);
    const linear = int16ToFloat32(resample(tone, MEDIA_RATE, 16_000));
    expect(levelDb(linear, 16_000, 3000) - levelDb(linear, 16_000, 5000)).toBeLessThan(15);
  });
});

describe('Moonshine base-en (the voice agent\'s default model for English callers)', () => {
  const config = (env: Record<string, string> = {}): Config => ({ ...configSchema.parse(env), CONCIERGE_MODELS_DIR: MODELS_DIR, TRANSCRIBE_MAX_SECONDS: 20, TRANSCRIBE_LANGUAGE: 'en' });
  let recognizer: EmbeddedSpeechRecognizer;

  beforeAll(() => {
    if (!MOONSHINE_MODEL_IDS.every((id) => modelFilesPresent(MODELS_DIR, id))) throw new Error(`${moonshineModelDir(config())} is missing or differs from its pinned sha256: run npm run models:fetch`);
    // The worker's wiring with Moonshine for finals and partials.
    const c = config({ VOICE_STT_MODEL: 'moonshine', VOICE_PARTIAL_MODEL: 'moonshine' });
    const transcriber = transcriberFromConfig(c);
    recognizer = speechRecognizerFor(transcriber, c.VOICE_LANGUAGE, voiceSpeechModels(c, transcriber)) as EmbeddedSpeechRecognizer;
    expect(recognizer.modelPaths).toEqual({ final: moonshineModelDir(c), partial: moonshineModelDir(c) });
  });
  afterAll(() => MoonshineTranscriber.unloadAll());

  test('"What are your opening hours" spoken at 8 kHz is transcribed with "opening hours"', async () => {
    expect((await recognizer.transcribe(say('What are your opening hours'))).toLowerCase()).toContain('opening hours');
  });

  test('the same speech after a G.711 μ-law line (PCMU out and back) still says "opening hours", as a partial too', async () => {
    const overTheLine = decodeMulaw(encodeMulaw(say('What are your opening hours')));
    expect((await recognizer.transcribe(overTheLine)).toLowerCase()).toContain('opening hours');
    expect((await recognizer.transcribe(overTheLine, undefined, { partial: true })).toLowerCase()).toContain('opening hours');
  });

  test('silence is an empty transcript, found by its loudness without the model (which need not even exist); speech then asks for models:fetch', async () => {
    const absent = new MoonshineTranscriber({ modelDir: path.join(os.tmpdir(), 'no-such-moonshine'), maxSeconds: 20 });
    const nowhere = new EmbeddedSpeechRecognizer(absent);
    expect(await nowhere.transcribe(new Int16Array(MEDIA_RATE * 2))).toBe('');
    const err = await nowhere.transcribe(say('hello')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TranscriberError);
    expect((err as Error).message).toMatch(/Moonshine speech-to-text model is missing .*run npm run models:fetch/);
  });

  test('a turn longer than TRANSCRIBE_MAX_SECONDS is refused as MediaTooLong before the model runs', async () => {
    await expect(recognizer.transcribe(new Int16Array(MEDIA_RATE * 21))).rejects.toBeInstanceOf(MediaTooLong);
  });

  test('a partial aborted while it waits in the queue is dropped without running; the running one and the next go on', async () => {
    const turn = say('What are your opening hours');
    const queued = new AbortController();
    const running = recognizer.transcribe(turn);
    const dropped = recognizer.transcribe(turn, undefined, { partial: true, whileQueued: queued.signal });
    const next = recognizer.transcribe(turn);
    queued.abort();
    const settled = await Promise.allSettled([running, dropped, next]);
    expect(settled[0]).toMatchObject({ status: 'fulfilled', value: expect.stringMatching(/opening hours/i) });
    expect(settled[1]).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ message: 'transcription was cancelled' }) });
    expect(settled[2]).toMatchObject({ status: 'fulfilled', value: expect.stringMatching(/opening hours/i) });
  });

  test('aborting `signal` stops a running transcription (barge-in, hang-up) without unloading: the next turn is heard', async () => {
    const controller = new AbortController();
    const long = recognizer.transcribe(say('What are your opening hours during the week, and are you also open on Saturday mornings?'), controller.signal);
    setTimeout(() => controller.abort(), 20);
    await expect(long).rejects.toMatchObject({ message: 'transcription was cancelled' });
    expect((await recognizer.transcribe(say('What are your opening hours'))).toLowerCase()).toContain('opening hours');
  });
});

describe('the voice agent\'s models (VOICE_STT_MODEL for finals, VOICE_PARTIAL_MODEL for partials)', () => {
  const config = (env: Record<string, string> = {}): Config => ({ ...configSchema.parse(env), CONCIERGE_MODELS_DIR: MODELS_DIR, TRANSCRIBE_MAX_SECONDS: 20, TRANSCRIBE_LANGUAGE: 'en' });
  const wired = (c: Config) => {
    const transcriber = transcriberFromConfig(c);
    return speechRecognizerFor(transcriber, c.VOICE_LANGUAGE, voiceSpeechModels(c, transcriber)) as EmbeddedSpeechRecognizer;
  };
  /** A models directory holding only the given files of MODELS_DIR (linked). */
  const withOnly = (files: string[], fn: (dir: string) => void) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-models-'));
    try {
      for (const f of files) {
        fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
        fs.symlinkSync(path.join(MODELS_DIR, f), path.join(dir, f));
      }
      fn(dir);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };
  afterAll(() => LocalWhisperTranscriber.unloadAll());

  test('models:fetch converted tiny.en to the GGML layout whisper.cpp expects of an English-only tiny model', () => {
    const c = config();
    const file = whisperTinyEnModelPath(c);
    if (!modelFilesPresent(MODELS_DIR, TINY_EN_WHISPER_MODEL)) throw new Error(`${file} is missing or differs from its pinned sha256: run npm run models:fetch`);
    expect(fs.statSync(file).size).toBe(CONVERTED_SOURCES[TINY_EN_WHISPER_MODEL].size);
    const head = Buffer.alloc(56);
    const fd = fs.openSync(file, 'r');
    fs.readSync(fd, head, 0, head.length, 0);
    // magic, n_vocab (English-only: 51864), n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype f16
    expect(Array.from({ length: 12 }, (_, i) => head.readInt32LE(i * 4))).toEqual([0x67676d6c, 51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1]);
    // The mel filter bank (80 × 201), then the vocabulary: OpenAI's gpt2.tiktoken, 50,256 tokens (whisper.cpp adds the special ones).
    expect([head.readInt32LE(48), head.readInt32LE(52)]).toEqual([80, 201]);
    const vocab = Buffer.alloc(4);
    fs.readSync(fd, vocab, 0, 4, 56 + 80 * 201 * 4);
    fs.closeSync(fd);
    expect(vocab.readInt32LE(0)).toBe(50256);
  });

  test('by default both go to Moonshine; each setting moves its own side to moonshine, base or tiny.en', () => {
    const c = config();
    const [moon, base, tiny] = [moonshineModelDir(c), whisperModelPath(c), whisperTinyEnModelPath(c)];
    expect(wired(c).modelPaths).toEqual({ final: moon, partial: moon });
    const both = (final: string, partial: string) => wired(config({ VOICE_STT_MODEL: final, VOICE_PARTIAL_MODEL: partial })).modelPaths;
    expect(both('moonshine', 'moonshine')).toEqual({ final: moon, partial: moon });
    expect(both('base', 'moonshine')).toEqual({ final: base, partial: moon });
    expect(both('base', 'tiny.en')).toEqual({ final: base, partial: tiny });
    expect(both('tiny.en', 'moonshine')).toEqual({ final: tiny, partial: moon });
    expect(both('moonshine', 'base')).toEqual({ final: moon, partial: base });
  });

  test('callers of another language get Whisper base for both (Moonshine and tiny.en hear English only); tiny.en for finals is refused there', () => {
    const c = config({ VOICE_LANGUAGE: 'de' });
    expect(wired(c).modelPaths).toEqual({ final: whisperModelPath(c), partial: whisperModelPath(c) });
    expect(wired(config({ VOICE_LANGUAGE: 'de', VOICE_PARTIAL_MODEL: 'tiny.en' })).modelPaths).toEqual({ final: whisperModelPath(c), partial: whisperModelPath(c) });
    expect(configSchema.safeParse({ VOICE_STT_MODEL: 'tiny.en', VOICE_LANGUAGE: 'de' }).success).toBe(false);
    expect(configSchema.safeParse({ VOICE_STT_MODEL: 'tiny.en', VOICE_LANGUAGE: 'en' }).success).toBe(true);
  });

  test('without Moonshine\'s files, partials fall back to tiny.en and finals to base; without tiny.en either, both to base', () => {
    const base = whisperModelPath(config());
    withOnly(['whisper/ggml-tiny.en.bin'], (dir) => {
      const c = { ...config(), TRANSCRIBE_MODEL_PATH: base, CONCIERGE_MODELS_DIR: dir };
      expect(wired(c).modelPaths).toEqual({ final: base, partial: whisperTinyEnModelPath(c) });
    });
    withOnly([], (dir) => {
      expect(wired({ ...config(), TRANSCRIBE_MODEL_PATH: base, CONCIERGE_MODELS_DIR: dir }).modelPaths).toEqual({ final: base, partial: base });
    });
  });

  test('a partial on tiny.en hears the turn; a transcription aborted while it waits in the queue is dropped without running, the running one goes on', async () => {
    const recognizer = wired(config({ VOICE_STT_MODEL: 'base', VOICE_PARTIAL_MODEL: 'tiny.en' }));
    const turn = say('What are your opening hours');
    expect((await recognizer.transcribe(turn, undefined, { partial: true })).toLowerCase()).toContain('opening');
    const queued = new AbortController();
    const running = recognizer.transcribe(turn);
    const dropped = recognizer.transcribe(turn, undefined, { whileQueued: queued.signal });
    const next = recognizer.transcribe(turn);
    queued.abort();
    const settled = await Promise.allSettled([running, dropped, next]);
    expect(settled[0]).toMatchObject({ status: 'fulfilled', value: expect.stringMatching(/opening hours/i) });
    expect(settled[1]).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ message: 'transcription was cancelled' }) });
    expect(settled[2]).toMatchObject({ status: 'fulfilled', value: expect.stringMatching(/opening hours/i) });
  });
});

describe('HttpSpeechRecognizer (OpenAI-compatible /v1/audio/transcriptions)', () => {
  let server: FakeSpeechServer;
  let hold: Promise<void> | null = null;

  beforeAll(async () => {
    server = await startFakeSpeechServer(async (req) => {
      if (hold) await hold;
      if (req.form?.model === 'broken') return { status: 500, message: 'model crashed' };
      return { text: ' What are your opening hours? ' };
    });
  });
  afterAll(() => server.close());

  test('sends the turn as an 8 kHz mono WAV (multipart file + model, bearer key) and answers the trimmed text', async () => {
    const turn = say('What are your opening hours');
    const recognizer = speechRecognizerFor(new OpenAiTranscriber(server.url, 'sk-stt', 'whisper-1'))!;
    expect(recognizer).toBeInstanceOf(HttpSpeechRecognizer);
    expect(await recognizer.transcribe(turn)).toBe('What are your opening hours?');
    const seen = server.requests.at(-1)!;
    expect(seen).toMatchObject({ path: '/v1/audio/transcriptions', authorization: 'Bearer sk-stt', form: { model: 'whisper-1', fileName: 'upload.wav', fileType: 'audio/wav' } });
    expect(parseWav(seen.form!.file)).toEqual({ sampleRate: MEDIA_RATE, channels: 1, samples: turn });
  });

  test('a server error is a TranscriberError with its status', async () => {
    const err = await new HttpSpeechRecognizer(new OpenAiTranscriber(server.url, '', 'broken')).transcribe(say('hello')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TranscriberError);
    expect(err).toMatchObject({ message: 'transcription failed (HTTP 500)', retryable: true });
  });

  test('aborting (barge-in, hang-up) stops the request and rejects with the signal reason', async () => {
    let release!: () => void;
    hold = new Promise<void>((resolve) => (release = resolve));
    const controller = new AbortController();
    const pending = new HttpSpeechRecognizer(new OpenAiTranscriber(server.url, '', 'whisper-1')).transcribe(say('hello'), controller.signal);
    setTimeout(() => controller.abort(new Error('caller hung up')), 100);
    await expect(pending).rejects.toThrow('caller hung up');
    hold = null;
    release();
  });
});
