import childProcess, { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dbfs, parseWav, pcmFromBytes } from '../../lib/audio/audio';
import { CallRecorder, ffmpegHasLibopus, finalizeRecordings, RecordingError, type CallRecorderOptions } from '../../domain/voice/recorder';
import { FRAME_MS, FRAME_SAMPLES, MEDIA_RATE } from '../../domain/ports/voice';
import { closeSpawnThread } from '../../lib/process/spawn-thread';
import { MemorySpool } from '../support/memory-spool';

/** 20 ms of a tone, continuing the phase at `frameIndex`. */
const toneFrame = (freq: number, frameIndex: number, amplitude = 8000) =>
  Int16Array.from({ length: FRAME_SAMPLES }, (_, i) => Math.round(amplitude * Math.sin((2 * Math.PI * freq * (frameIndex * FRAME_SAMPLES + i)) / MEDIA_RATE)));

/** A recorder on a clock the test moves. */
function recorderOnClock(spool: MemorySpool, opts: CallRecorderOptions = {}) {
  let ms = 1_000_000;
  const recorder = new CallRecorder(spool, { now: () => ms, ...opts });
  return { recorder, advance: (by: number) => (ms += by) };
}

/**
 * A 3 s call: the caller talks throughout (440 Hz); the agent answers 0.5–1.5 s and
 * 2.0–2.8 s (1 kHz), silent in between: that gap is not sent, so it must be laid out.
 */
function playCall(recorder: CallRecorder, advance: (ms: number) => void, frames = 150) {
  for (let f = 0; f < frames; f++) {
    const t = f * FRAME_MS;
    recorder.caller(toneFrame(440, f));
    if ((t >= 500 && t < 1500) || (t >= 2000 && t < 2800)) recorder.agent(toneFrame(1000, f));
    advance(FRAME_MS);
  }
}

function probe(file: string) {
  const out = JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-show_streams', '-show_format', '-of', 'json', file], { encoding: 'utf8' })) as {
    streams: Array<{ codec_name: string; channels: number }>;
    format: { duration: string };
  };
  return { codec: out.streams[0].codec_name, channels: out.streams[0].channels, durationMs: Number(out.format.duration) * 1000 };
}

/** The file decoded back to 8 kHz PCM by ffmpeg: [left/mono, right]. */
function decode(file: string, channels: 1 | 2): Int16Array[] {
  const raw = execFileSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-i', file, '-f', 's16le', '-ar', String(MEDIA_RATE), '-ac', String(channels), 'pipe:1'], { maxBuffer: 64 << 20 });
  const all = pcmFromBytes(raw);
  return Array.from({ length: channels }, (_, c) => all.filter((_, i) => i % channels === c));
}

/** Loudness of [fromMs, toMs) of a channel. */
const level = (pcm: Int16Array, fromMs: number, toMs: number) => dbfs(pcm.subarray((fromMs * MEDIA_RATE) / 1000, (toMs * MEDIA_RATE) / 1000));

describe('CallRecorder and finalizeRecordings', () => {
  afterAll(() => closeSpawnThread());

  test('ffmpeg here has libopus (the default output is Ogg/Opus)', async () => {
    expect(await ffmpegHasLibopus()).toBe(true);
  });

  test('two tracks on one clock with a gap → caller mono, agent mono and stereo Ogg/Opus, each 3 s (±50 ms); left is the caller, right the agent, silent in its gap', async () => {
    const spool = new MemorySpool();
    const { recorder, advance } = recorderOnClock(spool);
    playCall(recorder, advance);
    await recorder.close();

    const files = (await finalizeRecordings(spool))!;
    expect(files.caller).toMatchObject({ format: 'ogg', mime: 'audio/ogg', channels: 1, durationMs: 3000 });
    expect(files.combined).toMatchObject({ channels: 2, durationMs: 3000 });
    for (const [name, channels] of [['caller', 1], ['agent', 1], ['combined', 2]] as const) {
      const f = files[name];
      expect(f.bytes).toBe(fs.statSync(f.path).size);
      const p = probe(f.path);
      expect(p).toMatchObject({ codec: 'opus', channels });
      expect(Math.abs(p.durationMs - 3000)).toBeLessThanOrEqual(50);
    }
    const [left, right] = decode(files.combined.path, 2);
    expect(level(left, 100, 2900)).toBeGreaterThan(-20);
    expect(level(right, 600, 1400)).toBeGreaterThan(-20);
    expect(level(right, 1600, 1900)).toBeLessThan(-50); // the gap
    expect(level(right, 2100, 2700)).toBeGreaterThan(-20);
    expect(level(right, 100, 400)).toBeLessThan(-50); // before the agent spoke
    const [agentMono] = decode(files.agent.path, 1);
    expect(level(agentMono, 1600, 1900)).toBeLessThan(-50);
    expect(level(agentMono, 2100, 2700)).toBeGreaterThan(-20);
  });

  test('spooled as chunks of at most chunkMs with their clock positions; the gap is not stored', async () => {
    const spool = new MemorySpool();
    const { recorder, advance } = recorderOnClock(spool, { chunkMs: 1000 });
    playCall(recorder, advance);
    await recorder.close();
    expect(spool.list('caller')).toEqual([
      { seq: 0, startSample: 0, samples: 8000 },
      { seq: 1, startSample: 8000, samples: 8000 },
      { seq: 2, startSample: 16000, samples: 8000 },
    ]);
    // The agent's first reply starts at 0.5 s; its second is cut by the gap and starts on the clock at 2.0 s.
    expect(spool.list('agent')).toEqual([
      { seq: 0, startSample: 4000, samples: 8000 },
      { seq: 1, startSample: 16000, samples: 6400 },
    ]);
  });

  test('network jitter (frames ±40 ms off their time) is no gap; a frame 300 ms late is one', async () => {
    const spool = new MemorySpool();
    const { recorder, advance } = recorderOnClock(spool);
    const jitter = [0, 40, -30, 20, -40, 10];
    for (let f = 0; f < 60; f++) {
      advance(FRAME_MS + (jitter[f % jitter.length] - jitter[(f + jitter.length - 1) % jitter.length]));
      recorder.caller(toneFrame(440, f));
    }
    expect(recorder.trackEnds.caller).toBe(60 * FRAME_SAMPLES);
    advance(300 + FRAME_MS);
    recorder.caller(toneFrame(440, 60));
    await recorder.close();
    const chunks = spool.list('caller');
    expect(chunks).toHaveLength(2);
    expect(chunks[1].startSample).toBeGreaterThan(60 * FRAME_SAMPLES + (250 * MEDIA_RATE) / 1000);
  });

  test('stalls in the caller\'s frames (300 ms, 1.5 s, each then delivered as a burst): markers in both tracks, and in the stereo file\'s channels, stay within 100 ms of each other and of the clock, ten seconds on too', async () => {
    const spool = new MemorySpool();
    const { recorder, advance } = recorderOnClock(spool);
    // Markers (40 ms of 1 kHz) at known times in both tracks: before the stalls, inside each
    // stalled stretch (its frames arrive late, in the burst), and ten seconds after the last one.
    const markersMs = [1000, 2140, 4600, 15600];
    const stalls = [
      { from: 2000, to: 2300 },
      { from: 4000, to: 5500 },
    ];
    const frames = 16_000 / FRAME_MS;
    const marked = (f: number) => markersMs.some((m) => f * FRAME_MS >= m && f * FRAME_MS < m + 40);
    // The caller talks throughout (a quiet 300 Hz hum, the markers loud); the agent replies 100 ms either side of each marker.
    const callerFrame = (f: number) => (marked(f) ? toneFrame(1000, f) : toneFrame(300, f, 60));
    const held: Int16Array[] = [];
    for (let f = 0; f < frames; f++) {
      const t = f * FRAME_MS;
      const stalled = stalls.find((s) => t >= s.from && t < s.to);
      if (stalled) held.push(callerFrame(f));
      else {
        // The stall is over: the held frames arrive at once, then this one.
        for (const h of held.splice(0)) recorder.caller(h);
        recorder.caller(callerFrame(f));
      }
      if (markersMs.some((m) => t >= m - 100 && t < m + 100)) recorder.agent(marked(f) ? toneFrame(1000, f) : new Int16Array(FRAME_SAMPLES));
      advance(FRAME_MS);
    }
    // Both tracks end where the clock is (the caller's within 100 ms; the agent's last reply ended at 15.7 s).
    expect(Math.abs(recorder.trackEnds.caller - recorder.clockSample)).toBeLessThanOrEqual((100 * MEDIA_RATE) / 1000);
    await recorder.close();

    const files = (await finalizeRecordings(spool))!;
    const [caller] = decode(files.caller.path, 1);
    const [agent] = decode(files.agent.path, 1);
    const [left, right] = decode(files.combined.path, 2);
    /** Where the marker expected at `ms` starts in `pcm` (first sample above half the marker's amplitude within ±0.5 s), in ms. */
    const onset = (pcm: Int16Array, ms: number) => {
      const from = ((ms - 500) * MEDIA_RATE) / 1000;
      for (let i = from; i < from + MEDIA_RATE && i < pcm.length; i++) if (Math.abs(pcm[i]) > 4000) return (i * 1000) / MEDIA_RATE;
      return Number.NaN;
    };
    for (const m of markersMs) {
      const at = { caller: onset(caller, m), agent: onset(agent, m), left: onset(left, m), right: onset(right, m) };
      for (const [where, ms] of Object.entries(at)) {
        // Each marker where it was said (on the clock), in every track and channel.
        expect({ marker: m, where, off: Math.abs(ms - m) <= 100 }).toEqual({ marker: m, where, off: true });
      }
      expect(Math.abs(at.caller - at.agent)).toBeLessThanOrEqual(100);
      expect(Math.abs(at.left - at.right)).toBeLessThanOrEqual(100);
    }
  });

  test('frames faster than real time with no gap to fill (a sender running fast): the excess is dropped, the caller\'s track never more than 100 ms ahead', async () => {
    const spool = new MemorySpool();
    const { recorder, advance } = recorderOnClock(spool);
    for (let f = 0; f < 50; f++) {
      recorder.caller(toneFrame(440, f));
      advance(FRAME_MS);
    }
    // One second of frames at once, with no silence before them to slide back into.
    for (let f = 50; f < 100; f++) recorder.caller(toneFrame(440, f));
    const lead = recorder.trackEnds.caller - recorder.clockSample;
    expect(lead).toBeGreaterThan(0);
    expect(lead).toBeLessThanOrEqual((100 * MEDIA_RATE) / 1000);
    await recorder.close();
  });

  test('a recorder abandoned without close (the worker was killed) still finalizes from what was spooled: all but the unspooled last second', async () => {
    const spool = new MemorySpool();
    const { recorder, advance } = recorderOnClock(spool, { chunkMs: 1000, flushIntervalMs: 0 });
    playCall(recorder, advance, 125); // 2.5 s; chunks of 1 s are spooled as they fill
    await new Promise((resolve) => setImmediate(resolve));
    // No close(), no flush(): the last half second was never spooled.
    const files = (await finalizeRecordings(spool))!;
    expect(files.caller.durationMs).toBe(2000);
    const p = probe(files.combined.path);
    expect(p.channels).toBe(2);
    expect(Math.abs(p.durationMs - 2000)).toBeLessThanOrEqual(50);
    const [left, right] = decode(files.combined.path, 2);
    expect(level(left, 100, 1900)).toBeGreaterThan(-20);
    expect(level(right, 600, 1400)).toBeGreaterThan(-20);
  });

  test('the timer spools sparse audio that never fills a chunk', async () => {
    const spool = new MemorySpool();
    const recorder = new CallRecorder(spool, { chunkMs: 60_000, flushIntervalMs: 50 });
    recorder.agent(toneFrame(1000, 0));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(spool.list('agent')).toEqual([{ seq: 0, startSample: expect.any(Number), samples: FRAME_SAMPLES }]);
    await recorder.close();
  });

  test('a failed spool write is reported (RecordingError), kept, and stored in order by the next flush; a chunk is never stored twice', async () => {
    const spool = new MemorySpool();
    const errors: unknown[] = [];
    const { recorder, advance } = recorderOnClock(spool, { chunkMs: 1000, flushIntervalMs: 0, onError: (e) => errors.push(e) });
    const talk = (frames: number) => {
      for (let f = 0; f < frames; f++) {
        recorder.caller(toneFrame(440, f));
        advance(FRAME_MS);
      }
    };
    spool.failNext = 1;
    talk(75); // one chunk cut by size: its save fails
    await new Promise((resolve) => setImmediate(resolve));
    expect(errors).toEqual([expect.any(RecordingError)]);
    expect(spool.list('caller')).toEqual([]);
    await recorder.flush();
    expect(spool.list('caller')).toEqual([
      { seq: 0, startSample: 0, samples: 8000 },
      { seq: 1, startSample: 8000, samples: 4000 },
    ]);
    spool.failNext = 1;
    talk(5);
    await expect(recorder.flush()).rejects.toBeInstanceOf(RecordingError);
    await recorder.close();
    expect(spool.list('caller').map((c) => c.seq)).toEqual([0, 1, 2]);
    // Two failed writes, then each chunk written once: a stored chunk is not written again.
    expect(spool.saves).toBe(2 + 3);
  });

  test("format 'wav': PCM WAV files holding exactly the samples written, the gap as zeros", async () => {
    const spool = new MemorySpool();
    const { recorder, advance } = recorderOnClock(spool);
    const a = toneFrame(1000, 0);
    recorder.agent(a);
    advance(500);
    recorder.agent(a);
    recorder.caller(toneFrame(440, 0));
    await recorder.close();
    const files = (await finalizeRecordings(spool, { format: 'wav' }))!;
    expect(files.agent).toMatchObject({ format: 'wav', mime: 'audio/wav', durationMs: 520 });
    expect(probe(files.combined.path)).toMatchObject({ codec: 'pcm_s16le', channels: 2 });
    const agent = parseWav(fs.readFileSync(files.agent.path)).samples;
    expect(agent.subarray(0, FRAME_SAMPLES)).toEqual(a);
    expect(agent.subarray(FRAME_SAMPLES, 4000).every((s) => s === 0)).toBe(true);
    expect(agent.subarray(4000, 4000 + FRAME_SAMPLES)).toEqual(a);
  });

  test('nothing recorded: null, no files', async () => {
    expect(await finalizeRecordings(new MemorySpool())).toBeNull();
  });

  test("ffmpeg is started from the spawn thread, never from the main thread (a fork there stalls every call's audio), and the idle thread holds no handle", async () => {
    // The thread started by this test (not an earlier one's, already counted below).
    await closeSpawnThread();
    const spawn = jest.spyOn(childProcess, 'spawn');
    // Ports that keep the process alive (other files' threads may live in this Jest worker too).
    const ports = () => process.getActiveResourcesInfo().filter((r) => r === 'MessagePort').length;
    const before = ports();
    try {
      const spool = new MemorySpool();
      const { recorder, advance } = recorderOnClock(spool);
      playCall(recorder, advance, 20);
      await recorder.close();
      const files = (await finalizeRecordings(spool, { format: 'wav' }))!;
      expect(probe(files.combined.path)).toMatchObject({ codec: 'pcm_s16le', channels: 2 });
      expect(spawn).not.toHaveBeenCalled();
      // Referenced only while a command runs: the idle thread adds no port to what keeps the process alive.
      expect(ports()).toBe(before);
    } finally {
      spawn.mockRestore();
    }
  });

  test('no ffmpeg: RecordingError "recordings need ffmpeg, which is not installed", not retryable', async () => {
    const spool = new MemorySpool();
    const { recorder, advance } = recorderOnClock(spool);
    playCall(recorder, advance, 5);
    await recorder.close();
    const err = await finalizeRecordings(spool, { format: 'wav', ffmpeg: '/nonexistent/ffmpeg' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RecordingError);
    expect(err).toMatchObject({ message: 'recordings need ffmpeg, which is not installed', retryable: false });
  });

  test('ffmpeg failing: RecordingError "ffmpeg could not encode the recording" with the last 4000 characters of its stderr, not retryable', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recorder-test-'));
    const failing = path.join(dir, 'ffmpeg');
    // 5000 characters of x, then the end of the message: only the tail is kept.
    fs.writeFileSync(failing, `#!/bin/sh\nhead -c 5000 /dev/zero | tr '\\0' x >&2\necho ' the end' >&2\nexit 1\n`, { mode: 0o755 });
    try {
      const spool = new MemorySpool();
      const { recorder, advance } = recorderOnClock(spool);
      playCall(recorder, advance, 5);
      await recorder.close();
      const err = await finalizeRecordings(spool, { format: 'wav', ffmpeg: failing }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RecordingError);
      expect(err).toMatchObject({ message: 'ffmpeg could not encode the recording', retryable: false });
      const detail = (err as RecordingError).detail!;
      expect(detail.endsWith('x the end')).toBe(true);
      expect(detail.length).toBe(4000 - 1); // the tail's final newline trimmed
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
