import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dbfs } from '../../lib/audio/audio';
import { EspeakSynthesizer, OpenAiSpeechSynthesizer, SpeechSynthesisError } from '../../providers/speech/tts';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { startFakeSpeechServer, type FakeSpeechServer } from '../support/fake-speech';

const seconds = (pcm: Int16Array) => pcm.length / MEDIA_RATE;

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
    const long = 'This is a very long reply that the caller interrupts. '.repeat(200);
    const controller = new AbortController();
    const started = Date.now();
    const pending = new EspeakSynthesizer().synthesize(long, controller.signal);
    setTimeout(() => controller.abort(new Error('barge-in')), 50);
    await expect(pending).rejects.toThrow('barge-in');
    expect(Date.now() - started).toBeLessThan(1000);
    // The promise settles on the process's exit: no espeak-ng child is left running.
    expect(execFileSync('ps', ['-o', 'comm=', '--ppid', String(process.pid)], { encoding: 'utf8' }).split('\n')).not.toContain('espeak-ng');
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
