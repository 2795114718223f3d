import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { configSchema, whisperModelPath, type Config } from '../../core/config';
import { LocalWhisperTranscriber, MediaTooLong, OpenAiTranscriber, TranscriberError } from '../../core/kb/extract';
import { transcriberFromConfig } from '../../core/kb/extractor';
import { decodeMulaw, encodeMulaw, parseWav, wavToMono } from '../../core/voice/audio';
import { HttpSpeechRecognizer, speechRecognizerFor, WhisperSpeechRecognizer, type SpeechRecognizer } from '../../core/voice/stt';
import { MEDIA_RATE } from '../../core/voice/types';
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
