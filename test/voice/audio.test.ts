import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  StreamResampler, dbfs, decodeAlaw, decodeMulaw, downmix, encodeAlaw, encodeMulaw, encodeWav, float32ToInt16, int16ToFloat32,
  parseWav, pcmBytes, pcmFromBytes, resample, rms, wavToMono, WavFormatError,
} from '../../lib/audio/audio';
import { FRAME_MS, FRAME_SAMPLES } from '../../lib/audio/media-leg';
import { SEND_AHEAD_MS } from '../../lib/audio/paced-leg';
import { MemoryLeg } from './memory-leg';

const tone = (freq: number, rate: number, seconds: number, amplitude = 10_000) =>
  Int16Array.from({ length: Math.round(rate * seconds) }, (_, i) => Math.round(amplitude * Math.sin((2 * Math.PI * freq * i) / rate)));

/** Signal-to-noise ratio of `actual` against `reference` over [from, to), in dB. */
function snrDb(reference: Int16Array, actual: Int16Array, from = 0, to = reference.length): number {
  let signal = 0;
  let noise = 0;
  for (let i = from; i < to; i++) {
    signal += reference[i] ** 2;
    noise += (reference[i] - actual[i]) ** 2;
  }
  return 10 * Math.log10(signal / noise);
}

/** Amplitude of `freq` in the samples (one DFT bin), relative to full scale. */
function magnitude(samples: Int16Array, freq: number, rate: number): number {
  let re = 0;
  let im = 0;
  for (let i = 0; i < samples.length; i++) {
    re += samples[i] * Math.cos((2 * Math.PI * freq * i) / rate);
    im -= samples[i] * Math.sin((2 * Math.PI * freq * i) / rate);
  }
  return (2 * Math.hypot(re, im)) / samples.length / 32768;
}

describe('G.711', () => {
  test('μ-law code points of ITU-T G.711: 0 → 0xFF, -1 → 0x7F, full scale → 0x80/0x00; decoding 0xFF/0x7F → 0, 0x80/0x00 → ±32124, 0xF0 → 120', () => {
    expect([...encodeMulaw(Int16Array.of(0, 1, -1, 32767, -32768))]).toEqual([0xff, 0xff, 0x7f, 0x80, 0x00]);
    expect([...decodeMulaw(Uint8Array.of(0xff, 0x7f, 0x80, 0x00, 0xf0))]).toEqual([0, 0, 32124, -32124, 120]);
  });

  test('μ-law of every 16-bit value stays within the G.711 quantization error (a half step of its segment), and re-encoding a decoded code gives the code back', () => {
    const all = Int16Array.from({ length: 65536 }, (_, i) => i - 32768);
    const back = decodeMulaw(encodeMulaw(all));
    for (let i = 0; i < all.length; i++) {
      const x = Math.min(Math.abs(all[i]), 32635);
      // Segment e spans (x + 132) in [2^(e+7), 2^(e+8)) with 16 steps of 2^(e+3).
      const e = Math.max(0, Math.floor(Math.log2(x + 132)) - 7);
      const bound = 2 ** (e + 3) / 2 + (Math.abs(all[i]) - x) + 1;
      if (Math.abs(back[i] - all[i]) > bound) throw new Error(`${all[i]} → ${back[i]} exceeds ${bound}`);
    }
    const codes = Uint8Array.from({ length: 256 }, (_, c) => c);
    const reencoded = encodeMulaw(decodeMulaw(codes));
    // 0x7F (negative zero) re-encodes as 0xFF; every other code is itself.
    expect([...reencoded].filter((c, i) => c !== i)).toEqual([0xff]);
  });

  test('a 1 kHz sine through μ-law keeps G.711 quality (SNR above 35 dB)', () => {
    const sine = tone(1000, 8000, 1, 16_000);
    expect(snrDb(sine, decodeMulaw(encodeMulaw(sine)))).toBeGreaterThan(35);
  });

  test('A-law: 0 → 0xD5, -1 → 0x55, full scale → 0xAA/0x2A; a sine keeps an SNR above 35 dB', () => {
    expect([...encodeAlaw(Int16Array.of(0, -1, 32767, -32768))]).toEqual([0xd5, 0x55, 0xaa, 0x2a]);
    expect([...decodeAlaw(Uint8Array.of(0xd5, 0x55))]).toEqual([8, -8]);
    const sine = tone(1000, 8000, 1, 16_000);
    expect(snrDb(sine, decodeAlaw(encodeAlaw(sine)))).toBeGreaterThan(35);
  });
});

describe('sample formats and loudness', () => {
  test('Int16 → Float32 → Int16 is exact; floats past ±1 clip instead of wrapping', () => {
    const all = Int16Array.from({ length: 65536 }, (_, i) => i - 32768);
    expect(float32ToInt16(int16ToFloat32(all))).toEqual(all);
    expect(int16ToFloat32(Int16Array.of(-32768, 16384))).toEqual(Float32Array.of(-1, 0.5));
    expect([...float32ToInt16(Float32Array.of(1.5, -1.5, 1))]).toEqual([32767, -32768, 32767]);
  });

  test('RMS and dBFS: a half-scale square wave is -6 dBFS, a sine 3 dB below its peak, silence -Infinity', () => {
    const square = Int16Array.from({ length: 160 }, (_, i) => (i % 2 ? 16384 : -16384));
    expect(rms(square)).toBeCloseTo(0.5, 6);
    expect(dbfs(square)).toBeCloseTo(-6.02, 2);
    expect(dbfs(tone(400, 8000, 0.02, 16384))).toBeCloseTo(-9.03, 1);
    expect(dbfs(new Int16Array(160))).toBe(-Infinity);
  });

  test('downmix averages interleaved channels; PCM bytes round-trip little-endian', () => {
    expect([...downmix(Int16Array.of(100, 300, -10, -20), 2)]).toEqual([200, -15]);
    const pcm = Int16Array.of(1, -2, 32767, -32768);
    const bytes = pcmBytes(pcm);
    expect([...bytes.subarray(0, 4)]).toEqual([1, 0, 0xfe, 0xff]);
    // From an odd offset too (a Buffer sliced out of a larger one).
    const odd = Buffer.concat([Buffer.from([9]), bytes]).subarray(1);
    expect(pcmFromBytes(odd)).toEqual(pcm);
  });
});

describe('resampling', () => {
  test.each([
    [8000, 16000], [16000, 8000], [8000, 22050], [22050, 8000], [24000, 8000], [8000, 48000], [48000, 8000], [48000, 16000], [16000, 24000],
  ])('%i → %i Hz: a 440 Hz tone comes out as the same tone at the new rate (exact length, SNR above 25 dB away from the edges)', (from, to) => {
    const out = resample(tone(440, from, 1), from, to);
    expect(out.length).toBe(to);
    const expected = tone(440, to, 1);
    expect(snrDb(expected, out, Math.round(to * 0.01), Math.round(to * 0.99))).toBeGreaterThan(25);
  });

  test('going down, what lies above the new Nyquist frequency is filtered out instead of folding back (a 6 kHz tone at 22.05 kHz → 8 kHz is 30 dB down)', () => {
    const high = resample(tone(6000, 22050, 1), 22050, 8000);
    const low = resample(tone(1000, 22050, 1), 22050, 8000);
    // 6 kHz would alias to 2 kHz at 8 kHz.
    expect(20 * Math.log10(magnitude(high, 2000, 8000) / magnitude(low, 1000, 8000))).toBeLessThan(-30);
  });

  test('a stream resampled 20 ms at a time equals the whole signal resampled at once (no clicks at frame edges)', () => {
    for (const [from, to] of [[48000, 8000], [8000, 16000], [22050, 8000]]) {
      const input = tone(523, from, 0.5);
      const whole = resample(input, from, to);
      const r = new StreamResampler(from, to);
      const parts: Int16Array[] = [];
      const frame = Math.round(from / 50);
      for (let i = 0; i < input.length; i += frame) parts.push(r.push(input.subarray(i, i + frame)));
      parts.push(r.flush());
      const streamed = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) {
        streamed.set(p, at);
        at += p.length;
      }
      expect(streamed.subarray(0, whole.length)).toEqual(whole);
    }
  });
});

describe('WAV', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-wav-'));

  test('encodeWav → parseWav round-trips mono and stereo at any rate', () => {
    const mono = tone(300, 22050, 0.1);
    expect(parseWav(encodeWav(mono, 22050))).toEqual({ sampleRate: 22050, channels: 1, samples: mono });
    const stereo = Int16Array.of(1, 2, 3, 4, -5, -6);
    expect(parseWav(encodeWav(stereo, 48000, 2))).toEqual({ sampleRate: 48000, channels: 2, samples: stereo });
  });

  test("ffmpeg reads what encodeWav writes (its header is the standard one)", () => {
    const file = path.join(dir, 'ours.wav');
    fs.writeFileSync(file, encodeWav(tone(300, 16000, 0.5), 16000));
    const probe = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-show_streams', '-of', 'json', file], { encoding: 'utf8' })) as { streams: Array<Record<string, unknown>> };
    expect(probe.streams[0]).toMatchObject({ codec_name: 'pcm_s16le', sample_rate: '16000', channels: 1, duration: '0.500000' });
  });

  test("parses ffmpeg's stereo 48 kHz WAV with extra chunks (LIST), and espeak-ng's streamed WAV whose sizes are placeholders", () => {
    const file = path.join(dir, 'ff.wav');
    execFileSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '0.25', '-ac', '2', '-metadata', 'title=x', file]);
    const ff = parseWav(fs.readFileSync(file));
    expect(ff).toMatchObject({ sampleRate: 48000, channels: 2 });
    expect(ff.samples.length).toBe(12000 * 2);
    const espeak = execFileSync('espeak-ng', ['--stdout', '-v', 'en-us', 'hello']);
    expect(espeak.readUInt32LE(40)).toBeGreaterThan(espeak.length); // the placeholder
    const wav = parseWav(espeak);
    expect(wav).toMatchObject({ sampleRate: 22050, channels: 1 });
    expect(wav.samples.length).toBe((espeak.length - 44) / 2);
    expect(wavToMono(espeak, 8000).length).toBe(Math.round((wav.samples.length * 8000) / 22050));
  });

  test('refuses what is not 16-bit PCM WAV, saying why', () => {
    expect(() => parseWav(Buffer.from('not a wav file at all'))).toThrow(WavFormatError);
    const float = encodeWav(Int16Array.of(0, 0), 8000);
    float.writeUInt16LE(3, 20); // IEEE float
    expect(() => parseWav(float)).toThrow(/not 16-bit PCM/);
  });
});

describe('pacing agent audio (PacedLeg)', () => {
  const frames = (n: number) => new Int16Array(n * FRAME_SAMPLES).fill(1000);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  test(`each frame leaves at most SEND_AHEAD_MS (${SEND_AHEAD_MS} ms) before its play time; play times run on 20 ms apart with the RTP timestamps`, async () => {
    const leg = new MemoryLeg();
    const ahead: number[] = [];
    leg.onPlayed((_f, aheadMs) => ahead.push(aheadMs));
    const t0 = Date.now();
    leg.play(frames(25)); // 500 ms
    // At once: the frame due now and those due within the lead.
    expect(leg.sent.length).toBe(1 + SEND_AHEAD_MS / FRAME_MS);
    while (leg.playing) await sleep(10);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(500);
    expect(leg.sent).toHaveLength(25);
    for (const [i, s] of leg.sent.entries()) {
      expect(s.due).toBe(leg.sent[0].due + i * FRAME_MS);
      expect(s.due - s.at).toBeLessThanOrEqual(SEND_AHEAD_MS);
      expect(s.ts).toBe((leg.sent[0].ts + i * FRAME_SAMPLES) >>> 0);
      expect(s.marker).toBe(i === 0);
      // (the leg reads the clock once per tick, the test's leg once per frame: a millisecond apart at most)
      expect(Math.abs(ahead[i] - Math.max(0, s.due - s.at))).toBeLessThanOrEqual(1);
    }
  });

  test('a reply queued while the last is still playing at the far end follows on from its end (no marker, no gap); one queued after it ended starts a new talkspurt', async () => {
    const leg = new MemoryLeg();
    let playingWhenAllSent = false;
    leg.onPlayed(() => {
      if (leg.sent.length !== 10) return;
      // All of it sent, its end still ahead at the far end: the agent is still heard, and the next reply comes now.
      queueMicrotask(() => {
        playingWhenAllSent = leg.playing;
        leg.play(frames(5));
      });
    });
    leg.play(frames(10)); // 200 ms
    while (leg.sent.length < 11) await sleep(5);
    expect(playingWhenAllSent).toBe(true);
    const first = leg.sent[10];
    expect(first.due).toBe(leg.sent[9].due + FRAME_MS);
    expect(first.marker).toBe(false);
    expect(first.ts).toBe((leg.sent[9].ts + FRAME_SAMPLES) >>> 0);
    while (leg.playing) await sleep(10);
    await sleep(50);
    leg.play(frames(5));
    const next = leg.sent[15]; // sent at once: it is due now
    expect(next.marker).toBe(true);
    expect(next.due).toBeGreaterThan(leg.sent[14].due + FRAME_MS);
    expect(((next.ts - leg.sent[14].ts) >>> 0) > FRAME_SAMPLES).toBe(true);
    while (leg.playing) await sleep(10);
  });

  test('clearPlayback (barge-in) sends nothing more: only what had gone ahead is still heard, and the leg is no longer playing', async () => {
    const leg = new MemoryLeg();
    leg.play(frames(50)); // 1 s
    await sleep(200);
    leg.clearPlayback();
    const atClear = leg.sent.length;
    const clearedAt = Date.now();
    expect(leg.playing).toBe(false);
    await sleep(200);
    expect(leg.sent.length).toBe(atClear);
    expect(leg.sent.at(-1)!.due - clearedAt).toBeLessThanOrEqual(SEND_AHEAD_MS);
  });

  test('setSendAhead(0) (the caller talking over the agent) sends each frame only when it is due; null goes back to the lead', async () => {
    const leg = new MemoryLeg();
    leg.setSendAhead(0);
    leg.play(frames(10));
    expect(leg.sent.length).toBe(1);
    while (leg.playing) await sleep(10);
    expect(leg.sent.every((s) => s.due <= s.at)).toBe(true);
    leg.setSendAhead(null);
    await sleep(50);
    leg.play(frames(10));
    expect(leg.sent.length).toBe(10 + 1 + SEND_AHEAD_MS / FRAME_MS);
    while (leg.playing) await sleep(10);
  });
});
