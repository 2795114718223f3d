import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dbfs, decodeMulaw, encodeMulaw, resample } from '../../lib/audio/audio';
import { resampleSinc } from '../../lib/audio/sinc-resample';
import { EspeakSynthesizer, OpenAiSpeechSynthesizer, SpeechSynthesisError } from '../../providers/speech/tts';
import { DEFAULT_PIPER_VOICE, phonemeIds, piperOrEspeak, piperVoicePath, PiperSynthesizer, readPiperVoiceConfig } from '../../providers/speech/piper';
import { splitClauses } from '../../providers/speech/espeak-phonemes';
import { MoonshineTranscriber } from '../../providers/speech/moonshine';
import { EmbeddedSpeechRecognizer } from '../../providers/speech/stt';
import { configSchema, moonshineModelDir, type Config } from '../../app/config';
import { synthesizerFromConfig } from '../../app/voice';
import { modelFilesPresent, MOONSHINE_MODEL_IDS, PIPER_JOE_MODEL } from '../../bin/fetch-models';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { startFakeSpeechServer, type FakeSpeechServer } from '../support/fake-speech';

const seconds = (pcm: Int16Array) => pcm.length / MEDIA_RATE;
const MODELS_DIR = path.resolve(process.env.CONCIERGE_MODELS_DIR ?? path.join(__dirname, '../../.data/models'));
const PIPER_MODEL = piperVoicePath(MODELS_DIR, DEFAULT_PIPER_VOICE);

/** A real WAV as OpenAI answers it (24 kHz mono PCM16), written by ffmpeg from espeak-ng's speech. */
function openAiLikeWav(text: string): { wav: Buffer; samples: number } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-tts-'));
  const src = path.join(dir, 'src.wav');
  const out = path.join(dir, 'out.wav');
  execFileSync('espeak-ng', ['-v', 'en-us', '-w', src, text]);
  execFileSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', src, '-ar', '24000', '-ac', '1', '-c:a', 'pcm_s16le', out]);
  return { wav: fs.readFileSync(out), samples: samplesByFfprobe(out) };
}

/** The WAV file's sample count, as ffprobe counts it (not by our own parser). */
function samplesByFfprobe(file: string): number {
  const out = execFileSync('ffprobe', ['-v', 'error', '-show_streams', '-of', 'json', file], { encoding: 'utf8' });
  return Number((JSON.parse(out) as { streams: Array<{ duration_ts: number }> }).streams[0].duration_ts);
}

describe('EspeakSynthesizer', () => {
  test('speaks a sentence as 8 kHz PCM: audible (louder than -30 dBFS) and of a plausible length for 7 words', async () => {
    const pcm = await new EspeakSynthesizer().synthesize('We are open from nine to five today.');
    expect(seconds(pcm)).toBeGreaterThan(1.2);
    expect(seconds(pcm)).toBeLessThan(5);
    expect(dbfs(pcm)).toBeGreaterThan(-30);
  });

  test('speed is an option: 100 words a minute takes longer than 250', async () => {
    const text = 'Your table for four is booked for eight tonight.';
    const slow = await new EspeakSynthesizer({ wordsPerMinute: 100 }).synthesize(text);
    const fast = await new EspeakSynthesizer({ wordsPerMinute: 250 }).synthesize(text);
    expect(seconds(slow)).toBeGreaterThan(seconds(fast) * 1.8);
  });

  test('the text goes on stdin: a reply starting with "-" or holding markup is spoken, not read as options', async () => {
    const pcm = await new EspeakSynthesizer().synthesize('--version <speak>hello</speak>');
    expect(seconds(pcm)).toBeGreaterThan(0.5);
    expect(dbfs(pcm)).toBeGreaterThan(-30);
  });

  test('aborting kills espeak-ng at once and rejects with the signal reason', async () => {
    const espeaks = () => execFileSync('ps', ['-o', 'comm=', '--ppid', String(process.pid)], { encoding: 'utf8' }).split('\n').filter((c) => c === 'espeak-ng').length;
    await EspeakSynthesizer.unloadAll();
    // Files run before this one in the same Jest worker have their own module registry, so their own espeak thread and
    // spare espeak-ng (this process's children too): counted from here.
    const before = espeaks();
    const long = 'This is a very long reply that the caller interrupts. '.repeat(200);
    const controller = new AbortController();
    const started = Date.now();
    const pending = new EspeakSynthesizer().synthesize(long, controller.signal);
    setTimeout(() => controller.abort(new Error('barge-in')), 50);
    await expect(pending).rejects.toThrow('barge-in');
    expect(Date.now() - started).toBeLessThan(5000); // a whole synthesis of this text takes minutes: the margin is for a busy machine
    // The promise settles on the process's exit: the one espeak-ng left is the spare waiting for the next text, which
    // unloadAll ends.
    expect(espeaks()).toBe(before + 1);
    await EspeakSynthesizer.unloadAll();
    expect(espeaks()).toBe(before);
  });

  test('a missing executable is a SpeechSynthesisError that says so, not retryable', async () => {
    const err = await new EspeakSynthesizer({ executable: '/nonexistent/espeak-ng' }).synthesize('hello').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SpeechSynthesisError);
    expect(err).toMatchObject({ code: 'SpeechSynthesisRejected', retryable: false, message: expect.stringMatching(/needs espeak-ng/) });
  });
});

describe('OpenAiSpeechSynthesizer against an OpenAI-compatible server', () => {
  let server: FakeSpeechServer;
  const { wav, samples: sourceSamples } = openAiLikeWav('Thank you for calling.');
  let next: { status: number; message?: string } | null = null;

  beforeAll(async () => {
    server = await startFakeSpeechServer(() => {
      const answer = next ?? { audio: wav };
      next = null;
      return answer;
    });
  });
  afterAll(() => server.close());

  test('POSTs {model, input, voice, response_format: wav} with the bearer key and turns the 24 kHz WAV into 8 kHz PCM of the same length', async () => {
    const tts = new OpenAiSpeechSynthesizer({ baseUrl: server.url, apiKey: 'sk-voice', model: 'tts-1', voice: 'alloy' });
    const pcm = await tts.synthesize('Thank you for calling.');
    expect(server.requests.at(-1)).toEqual({
      path: '/v1/audio/speech',
      authorization: 'Bearer sk-voice',
      json: { model: 'tts-1', input: 'Thank you for calling.', voice: 'alloy', response_format: 'wav' },
    });
    expect(sourceSamples).toBeGreaterThan(24000);
    expect(pcm.length).toBe(Math.round((sourceSamples * MEDIA_RATE) / 24000));
    expect(dbfs(pcm)).toBeGreaterThan(-30);
  });

  test('a base URL ending in /v1 and no key: the same endpoint, no Authorization header', async () => {
    await new OpenAiSpeechSynthesizer({ baseUrl: `${server.url}/v1`, model: 'kokoro', voice: 'af_heart' }).synthesize('Hi.');
    expect(server.requests.at(-1)).toMatchObject({ path: '/v1/audio/speech', authorization: undefined, json: { model: 'kokoro', voice: 'af_heart' } });
  });

  test('a non-2xx answer is a SpeechSynthesisError with the status and the server message: 503 retryable, 401 not', async () => {
    const tts = new OpenAiSpeechSynthesizer({ baseUrl: server.url, apiKey: 'sk-voice', model: 'tts-1', voice: 'alloy' });
    next = { status: 503, message: 'overloaded' };
    const busy = await tts.synthesize('Hello.').catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(SpeechSynthesisError);
    expect(busy).toMatchObject({ message: 'speech synthesis failed (HTTP 503)', status: 503, retryable: true, code: 'SpeechSynthesisError', detail: 'overloaded' });
    next = { status: 401, message: 'bad key sk-voice' };
    const refused = await tts.synthesize('Hello.').catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 401, retryable: false, code: 'SpeechSynthesisRejected', detail: 'bad key [redacted]' });
  });

  test('an answer that is not WAV (an MP3 from a server ignoring response_format) is a clear, non-retryable error', async () => {
    const mp3 = await startFakeSpeechServer(() => ({ audio: Buffer.from('ID3\x03\x00\x00\x00garbage'), contentType: 'audio/mpeg' }));
    try {
      const err = await new OpenAiSpeechSynthesizer({ baseUrl: mp3.url, model: 'tts-1', voice: 'alloy' }).synthesize('Hello.').catch((e: unknown) => e);
      expect(err).toMatchObject({ message: 'speech synthesis failed (the server did not answer 16-bit PCM WAV)', retryable: false });
    } finally {
      await mp3.close();
    }
  });

  test('an unreachable server is a retryable SpeechSynthesisError', async () => {
    const err = await new OpenAiSpeechSynthesizer({ baseUrl: 'http://127.0.0.1:1', model: 'tts-1', voice: 'alloy' }).synthesize('Hello.').catch((e: unknown) => e);
    expect(err).toMatchObject({ message: 'speech synthesis failed (the server could not be reached)', retryable: true });
  });
});

/** Level of `hz` in the samples (Goertzel), relative to a full-scale sine: 0 dB for one. */
function levelDb(x: ArrayLike<number>, rate: number, hz: number): number {
  const w = (2 * Math.PI * hz) / rate;
  let s1 = 0;
  let s2 = 0;
  const c = 2 * Math.cos(w);
  for (let i = 0; i < x.length; i++) {
    const s0 = x[i] + c * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return 20 * Math.log10(Math.sqrt(Math.max(1e-30, s1 * s1 + s2 * s2 - 2 * Math.cos(w) * s1 * s2)) / (x.length / 2));
}
const tone = (hz: number, rate: number) => Float32Array.from({ length: rate }, (_, i) => 0.5 * Math.sin((2 * Math.PI * hz * i) / rate));

describe('the synthesizers\' 22.05 kHz → 8 kHz conversion (resampleSinc)', () => {
  // Measured in the middle second's steady state: the edges (silence assumed around the tone) are cut off.
  const steady = (x: Float32Array) => x.subarray(1000, x.length - 1000);

  test('the telephone band passes at its level (300 Hz to 3.4 kHz within 0.2 dB; the old linear resampler lost 3.6 dB at 3.4 kHz)', () => {
    for (const hz of [300, 1000, 3000, 3400]) {
      const out = resampleSinc(tone(hz, 22_050), 22_050, MEDIA_RATE);
      expect(out).toHaveLength(MEDIA_RATE);
      expect(Math.abs(levelDb(steady(out), MEDIA_RATE, hz) - levelDb(steady(tone(hz, MEDIA_RATE)), MEDIA_RATE, hz))).toBeLessThan(0.2);
    }
    const old = resample(Int16Array.from(tone(3400, 22_050), (v) => Math.round(v * 32767)), 22_050, MEDIA_RATE);
    expect(levelDb(steady(Float32Array.from(old, (v) => v / 32767)), MEDIA_RATE, 3400) - levelDb(steady(tone(3400, MEDIA_RATE)), MEDIA_RATE, 3400)).toBeLessThan(-3);
  });

  test('a 5 kHz tone (and 4.3 kHz, 10 kHz) is stopped rather than folded back into the band: its alias at 3 kHz (3.7, 2 kHz) is 80 dB down', () => {
    for (const [hz, alias] of [[5000, 3000], [4300, 3700], [10_000, 2000]]) {
      const out = steady(resampleSinc(tone(hz, 22_050), 22_050, MEDIA_RATE));
      // The input's level is -6 dB (a 0.5 sine); what folds back to `alias` must be below -86 dB.
      expect(levelDb(out, MEDIA_RATE, alias)).toBeLessThan(-86);
    }
  });
});

describe('Piper (en_US-joe-medium) through onnxruntime-node, phonemes from the espeak-ng program', () => {
  let piper: PiperSynthesizer;
  let stt: EmbeddedSpeechRecognizer;

  beforeAll(async () => {
    if (!modelFilesPresent(MODELS_DIR, PIPER_JOE_MODEL)) throw new Error(`${path.dirname(PIPER_MODEL)} is missing or differs from its pinned sha256: run npm run models:fetch`);
    if (!MOONSHINE_MODEL_IDS.every((id) => modelFilesPresent(MODELS_DIR, id))) throw new Error('Moonshine is missing: run npm run models:fetch');
    piper = new PiperSynthesizer({ model: PIPER_MODEL, log: (line) => { throw new Error(`unexpected fallback: ${line}`); } });
    const config: Config = { ...configSchema.parse({}), CONCIERGE_MODELS_DIR: MODELS_DIR };
    stt = new EmbeddedSpeechRecognizer(new MoonshineTranscriber({ modelDir: moonshineModelDir(config), maxSeconds: 20 }), 'en');
    await piper.ready();
  }, 120_000);
  afterAll(async () => {
    piper?.close();
    await PiperSynthesizer.unloadAll();
    await MoonshineTranscriber.unloadAll();
  });

  test('phoneme ids as piper-phonemize makes them: BOS, each phoneme then the pad, EOS; one sentence per . ? !, with , and its space kept', async () => {
    const map = readPiperVoiceConfig(`${PIPER_MODEL}.json`).phonemeIdMap;
    const id = (ph: string) => map.get(ph)![0];
    expect(phonemeIds('hə', map)).toEqual([id('^'), id('_'), id('h'), id('_'), id('ə'), id('_'), id('$')]);
    expect(splitClauses('Hello there, how are you? Fine. $5.50 each')).toEqual([
      { text: 'Hello there', punctuation: ',' },
      { text: 'how are you', punctuation: '?' },
      { text: 'Fine', punctuation: '.' },
      { text: '$5.50 each', punctuation: '' },
    ]);
    const sentences = await piper.phonemeIds('Hello there, how are you? Fine.');
    expect(sentences).toHaveLength(2);
    const first = sentences[0].filter((_, i) => i % 2 === 0);
    // "həlˈoʊ ðˈɛɹ, hˌaʊ ɑːɹ juː?" — the comma, then a space, inside the first sentence; the question mark ends it.
    expect(first.slice(0, 4)).toEqual([id('^'), id('h'), id('ə'), id('l')]);
    expect(first.join(' ')).toContain(`${id(',')} ${id(' ')} ${id('h')}`);
    expect(first.slice(-2)).toEqual([id('?'), id('$')]);
  });

  test('speaks a sentence as 8 kHz PCM of a plausible length and level, which Moonshine transcribes word for word, also after a G.711 line', async () => {
    const text = 'We are open from nine to five today.';
    const pcm = await piper.synthesize(text);
    expect(seconds(pcm)).toBeGreaterThan(1.2);
    expect(seconds(pcm)).toBeLessThan(5);
    expect(dbfs(pcm)).toBeGreaterThan(-30);
    expect(piper.lastStats).toMatchObject({ sentences: 1 });
    const words = (t: string) => t.toLowerCase().replace(/[^a-z ]/g, '').split(/\s+/).filter(Boolean);
    expect(words(await stt.transcribe(pcm))).toEqual(words(text));
    // The phone's leg: PCMU out and back.
    expect(words(await stt.transcribe(decodeMulaw(encodeMulaw(pcm))))).toEqual(expect.arrayContaining(['open', 'nine', 'five', 'today']));
  });

  test('two sentences are spoken with a pause between them and transcribed together', async () => {
    const pcm = await piper.synthesize('Your table is booked. See you at eight.');
    expect(piper.lastStats).toMatchObject({ sentences: 2 });
    expect((await stt.transcribe(pcm)).toLowerCase()).toMatch(/table is booked\W+see you at (eight|8)/);
  });

  test('aborting while the voice speaks a long reply rejects with the signal reason, and the voice then speaks the next clause', async () => {
    const controller = new AbortController();
    const pending = piper.synthesize('This is a long reply that the caller interrupts. '.repeat(8), controller.signal);
    setTimeout(() => controller.abort(new Error('barge-in')), 100);
    await expect(pending).rejects.toThrow('barge-in');
    const next = await piper.synthesize('Yes?');
    expect(piper.lastStats).toMatchObject({ sentences: 1 });
    expect(dbfs(next)).toBeGreaterThan(-30);
  });
});

describe('the Piper voice missing or broken: espeak-ng speaks instead, with a log line', () => {
  test('a missing model: piperOrEspeak answers espeak-ng and says why; TTS_ENGINE=piper without models does the same', async () => {
    const lines: string[] = [];
    const tts = piperOrEspeak({ model: path.join(os.tmpdir(), 'no-such-voice', 'x.onnx'), log: (l) => lines.push(l) });
    expect(tts).toBeInstanceOf(EspeakSynthesizer);
    expect(lines).toEqual([expect.stringMatching(/Piper voice is missing .*x\.onnx.*espeak-ng instead/)]);
    expect(dbfs(await tts.synthesize('Hello there.'))).toBeGreaterThan(-30);

    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-no-models-'));
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      const config: Config = { ...configSchema.parse({ TTS_ENGINE: 'piper' }), CONCIERGE_MODELS_DIR: empty };
      expect(synthesizerFromConfig(config)).toBeInstanceOf(EspeakSynthesizer);
      expect(warn).toHaveBeenCalledWith(expect.stringContaining(path.join(empty, 'piper', 'en_US-joe-medium', 'en_US-joe-medium.onnx')));
    } finally {
      warn.mockRestore();
    }
  });

  test('a model that does not load (not ONNX): the call is spoken by espeak-ng, the failure logged once, nothing thrown', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-bad-voice-'));
    const model = path.join(dir, 'broken.onnx');
    fs.writeFileSync(model, 'not a model');
    fs.copyFileSync(`${PIPER_MODEL}.json`, `${model}.json`);
    const lines: string[] = [];
    const tts = piperOrEspeak({ model, log: (l) => lines.push(l) });
    expect(tts).toBeInstanceOf(PiperSynthesizer);
    await expect((tts as PiperSynthesizer).ready()).rejects.toThrow(/did not load/);
    expect(dbfs(await tts.synthesize('Hello there.'))).toBeGreaterThan(-30);
    expect(dbfs(await tts.synthesize('Goodbye.'))).toBeGreaterThan(-30);
    expect(lines).toEqual([expect.stringMatching(/Piper voice is not available .*did not load.*espeak-ng instead/)]);
    (tts as PiperSynthesizer).close();
  });
});
