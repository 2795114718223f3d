import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { configSchema, whisperModelPath, whisperTinyEnModelPath, type Config } from '../../app/config';
import { MediaTooLong, TranscriberError } from '../../lib/extract';
import { LocalWhisperTranscriber } from '../../providers/speech/whisper';
import { OpenAiTranscriber } from '../../providers/speech/openai-transcriber';
import { transcriberFromConfig } from '../../app/extractor';
import { decodeMulaw, encodeMulaw, parseWav, wavToMono } from '../../lib/audio/audio';
import { voiceWhisperModels } from '../../app/voice';
import { HttpSpeechRecognizer, speechRecognizerFor, WhisperSpeechRecognizer, type SpeechRecognizer } from '../../providers/speech/stt';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { CONVERTED_SOURCES, modelFilesPresent, TINY_EN_WHISPER_MODEL } from '../../bin/fetch-models';
import { startFakeSpeechServer, type FakeSpeechServer } from '../support/fake-speech';

const MODELS_DIR = path.resolve(process.env.CONCIERGE_MODELS_DIR ?? path.join(__dirname, '../../.data/models'));
/** espeak-ng's speech brought down to the call's 8 kHz, as a caller's turn reaches the recognizer (no silence around it). */
const say = (text: string) => wavToMono(execFileSync('espeak-ng', ['--stdout', '-v', 'en-us', '-s', '150'], { input: text }), MEDIA_RATE);

describe('WhisperSpeechRecognizer (the embedded whisper.cpp, in memory)', () => {
  let recognizer: SpeechRecognizer;

  beforeAll(() => {
    const config: Config = { ...configSchema.parse({}), CONCIERGE_MODELS_DIR: MODELS_DIR, TRANSCRIBE_MAX_SECONDS: 20, TRANSCRIBE_LANGUAGE: 'en' };
    if (!fs.existsSync(whisperModelPath(config))) throw new Error(`${whisperModelPath(config)} is missing: run npm run models:fetch`);
    // The same wiring as the worker: the configured transcriber, wrapped for calls.
    recognizer = speechRecognizerFor(transcriberFromConfig(config))!;
    expect(recognizer).toBeInstanceOf(WhisperSpeechRecognizer);
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

describe('the voice agent\'s models: Whisper tiny.en for partials (VOICE_PARTIAL_MODEL), base for finals (VOICE_STT_MODEL)', () => {
  const config = (env: Record<string, string> = {}): Config => ({ ...configSchema.parse(env), CONCIERGE_MODELS_DIR: MODELS_DIR, TRANSCRIBE_MAX_SECONDS: 20, TRANSCRIBE_LANGUAGE: 'en' });
  const wired = (c: Config) => {
    const transcriber = transcriberFromConfig(c);
    return speechRecognizerFor(transcriber, c.VOICE_LANGUAGE, voiceWhisperModels(c, transcriber)) as WhisperSpeechRecognizer;
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

  test('by default partials go to tiny.en and finals to the transcriber\'s base model; VOICE_STT_MODEL=tiny.en moves the finals too', () => {
    const c = config();
    expect(wired(c).modelPaths).toEqual({ final: whisperModelPath(c), partial: whisperTinyEnModelPath(c) });
    expect(wired(config({ VOICE_STT_MODEL: 'tiny.en' })).modelPaths).toEqual({ final: whisperTinyEnModelPath(c), partial: whisperTinyEnModelPath(c) });
    expect(wired(config({ VOICE_PARTIAL_MODEL: 'base' })).modelPaths).toEqual({ final: whisperModelPath(c), partial: whisperModelPath(c) });
  });

  test('callers of another language keep base for partials; tiny.en for finals is refused with another VOICE_LANGUAGE', () => {
    const c = config({ VOICE_LANGUAGE: 'de' });
    expect(wired(c).modelPaths).toEqual({ final: whisperModelPath(c), partial: whisperModelPath(c) });
    expect(configSchema.safeParse({ VOICE_STT_MODEL: 'tiny.en', VOICE_LANGUAGE: 'de' }).success).toBe(false);
    expect(configSchema.safeParse({ VOICE_STT_MODEL: 'tiny.en', VOICE_LANGUAGE: 'en' }).success).toBe(true);
  });

  test('without the tiny.en file, both go to the transcriber\'s model', () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-models-'));
    try {
      const c = { ...config(), TRANSCRIBE_MODEL_PATH: whisperModelPath(config()), CONCIERGE_MODELS_DIR: empty };
      expect(wired(c).modelPaths).toEqual({ final: whisperModelPath(c), partial: whisperModelPath(c) });
    } finally {
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });

  test('a partial on tiny.en hears the turn; a transcription aborted while it waits in the queue is dropped without running, the running one goes on', async () => {
    const recognizer = wired(config());
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
