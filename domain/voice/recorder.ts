import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { OperationalError } from '../../lib/failures';
import { pcmBytes } from '../../lib/audio/audio';
import { runCommand } from '../../lib/process/spawn-thread';
import { MEDIA_RATE } from '../ports/voice';

/**
 * Call recording in two steps, so that a worker that dies mid-call loses seconds, not the
 * call:
 *
 * 1. During the call, CallRecorder keeps two tracks (caller = frames received, agent =
 *    frames played) on one clock, the sample offset since the session started, and
 *    spools raw PCM chunks (16-bit LE, mono, MEDIA_RATE) to durable storage every
 *    `chunkMs` and on flush. Each chunk carries its start sample, so gaps (the agent is
 *    silent between replies; packets lost) are not stored: they are silence.
 * 2. After the call (or after a crash, from whatever was spooled), finalizeRecordings
 *    lays the chunks out on the clock and has ffmpeg write three files: caller mono,
 *    agent mono, and both in stereo (left caller, right agent).
 */

export type RecordingTrack = 'caller' | 'agent';
export const RECORDING_TRACKS: readonly RecordingTrack[] = ['caller', 'agent'];

/** A run of one track's audio: 16-bit LE mono PCM at MEDIA_RATE starting at `startSample` of the call's clock. */
export interface RecordingChunk {
  seq: number;
  startSample: number;
  pcm: Buffer;
}

/**
 * Durable storage of one session's chunks. Meant for a table
 * `voice_recording_chunks(session_id, track, seq, start_sample, sha256)` with a unique
 * (session_id, track, seq) and the bytes in the content-addressed BlobStore (stage a
 * Readable of `pcm`, commit, insert the row; read back with `open(sha256)`).
 */
export interface RecordingSpool {
  /**
   * Stores one chunk durably; resolves once it is stored. Saving the same (track, seq)
   * again is not an error (a retry after a save that did land): the first one stays.
   */
  saveChunk(track: RecordingTrack, seq: number, startSample: number, pcm: Buffer): Promise<void>;
  /** The track's chunks in `seq` order, one at a time (an hour of a track is ~57 MB: never all in memory). */
  chunks(track: RecordingTrack): AsyncIterable<RecordingChunk>;
}

export interface CallRecorderOptions {
  /** Samples per second of the frames (MEDIA_RATE). */
  sampleRate?: number;
  /** A track's pending audio is spooled when it reaches this much (default 5000 ms). */
  chunkMs?: number;
  /** Pending audio is spooled at least this often (default chunkMs; 0: only by size and flush): about the most a crash loses. */
  flushIntervalMs?: number;
  /**
   * A frame that arrives later than the track's end by more than this starts after a gap
   * of silence; closer, it follows on directly (network jitter is not a gap). A track is
   * never more than this ahead of the clock either: tracks stay within this much of the
   * clock, and so of each other (default 100 ms).
   */
  jitterMs?: number;
  /** Milliseconds on a monotonic clock (default performance.now); tests drive it. */
  now?: () => number;
  /** A spool write failed (a RecordingError; the chunks stay queued and are retried on the next cut or flush). */
  onError?: (err: unknown) => void;
}

/** A spool write failed: the chunks are kept and retried; `flush` reports it. */
export class RecordingError extends OperationalError {
  override readonly name = 'RecordingError';
  constructor(message: string, detail?: string, retryable = true) {
    super('RecordingError', message, retryable, { detail });
  }
}

/** Contiguous samples of one track not yet handed to the spool. */
interface Run {
  startSample: number;
  pieces: Int16Array[];
  samples: number;
  /** The track's end before this run: a run that started after a gap may slide back as far as this (a late burst, below). */
  floor: number;
  /** The clock when the run was opened. */
  openedAt: number;
}

interface TrackState {
  /** The sample just after the track's last audio (its end on the clock). */
  end: number;
  /** Audio not yet handed to the spool: runs of contiguous samples. */
  pending: Run[];
  nextSeq: number;
}

/**
 * Records a call's two tracks on one clock and spools them (see the module comment).
 * Feed it every frame: `caller(frame)` for each frame received, `agent(frame)` for each
 * frame as it is played out (not whole replies when queued: a reply cut by barge-in was
 * never heard, and only the leg knows when a frame actually goes out).
 */
export class CallRecorder {
  readonly sampleRate: number;
  private readonly chunkSamples: number;
  private readonly jitterSamples: number;
  private readonly now: () => number;
  private readonly startedAt: number;
  private readonly tracks: Record<RecordingTrack, TrackState>;
  /** Chunks cut but not yet stored, in order; the head is retried after a failure. */
  private readonly unsaved: Array<{ track: RecordingTrack; seq: number; startSample: number; pcm: Buffer }> = [];
  /** The running spool write (one at a time, in seq order). */
  private saving: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout | null;
  private closed = false;

  constructor(
    private readonly spool: RecordingSpool,
    private readonly opts: CallRecorderOptions = {},
  ) {
    this.sampleRate = opts.sampleRate ?? MEDIA_RATE;
    const chunkMs = opts.chunkMs ?? 5000;
    this.chunkSamples = Math.round((chunkMs * this.sampleRate) / 1000);
    this.jitterSamples = Math.round(((opts.jitterMs ?? 100) * this.sampleRate) / 1000);
    this.now = opts.now ?? (() => performance.now());
    this.startedAt = this.now();
    this.tracks = { caller: { end: 0, pending: [], nextSeq: 0 }, agent: { end: 0, pending: [], nextSeq: 0 } };
    // Sparse audio (the agent's short replies) never fills a chunk: the timer spools it.
    const every = opts.flushIntervalMs ?? chunkMs;
    this.timer = every > 0 ? setInterval(() => this.cutAll(), every) : null;
    this.timer?.unref();
  }

  /** The call's clock: samples since the recorder started. */
  get clockSample(): number {
    return Math.round(((this.now() - this.startedAt) * this.sampleRate) / 1000);
  }

  /** A frame received from the caller. */
  caller(frame: Int16Array, atSample?: number): void {
    this.write('caller', frame, atSample);
  }

  /** A frame played to the caller. */
  agent(frame: Int16Array, atSample?: number): void {
    this.write('agent', frame, atSample);
  }

  /**
   * Appends `frame` to `track` at `atSample` (default: now on the clock). Audio never
   * overlaps: a frame due before the track's end (jitter) follows on at the end.
   *
   * A stall (the event loop was busy, the network held packets) delivers the frames it
   * held late and at once. The first one arrives after a gap and opens a run on the
   * clock; the rest of the burst would run the track ahead of the clock for the rest of
   * the call. Instead the run slides back into the gap it opened, so the burst ends where
   * the clock is: the stalled audio lands where it was said. Frames still ahead of the
   * clock by more than `jitterMs` with no gap left to slide into (a sender faster than
   * real time) are dropped: received audio cannot be ahead of its arrival.
   */
  write(track: RecordingTrack, frame: Int16Array, atSample = this.clockSample): void {
    if (this.closed) throw new Error('the recorder is closed');
    if (!frame.length) return;
    const t = this.tracks[track];
    const last = t.pending.at(-1);
    let run = last && last.startSample + last.samples === t.end ? last : undefined;
    if (atSample - t.end > this.jitterSamples) {
      // A gap (or the start of a late burst): the silence is left out of the spool; the new run starts on the clock.
      run = { startSample: atSample, pieces: [], samples: 0, floor: t.end, openedAt: atSample };
      t.pending.push(run);
      t.end = atSample;
    }
    // How far the track would end past the frame's due end (arriving now, it ends one frame from now).
    let lead = t.end + frame.length - (atSample + frame.length);
    if (lead > 0 && run && run.startSample > run.floor) {
      const back = Math.min(lead, run.startSample - run.floor);
      run.startSample -= back;
      t.end -= back;
      lead -= back;
    }
    // Past `jitterMs` ahead of the clock (the frame that arrived now ending there included): not recorded.
    if (lead + frame.length > this.jitterSamples) return;
    if (!run) {
      run = { startSample: t.end, pieces: [], samples: 0, floor: t.end, openedAt: atSample };
      t.pending.push(run);
    }
    // A copy: legs reuse their frame buffers.
    run.pieces.push(frame.slice());
    run.samples += frame.length;
    t.end += frame.length;
    if (this.pendingSamples(t) >= this.chunkSamples) {
      this.cut(track, true);
      this.schedule();
    }
  }

  /** Spools everything pending now; resolves once it is stored (rejects with the storage's failure: the chunks stay queued). */
  async flush(): Promise<void> {
    this.cutAll();
    await this.saving;
  }

  /** Flushes and stops the timer. Frames written afterwards are refused. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
    this.closed = true;
  }

  /** The end of each track on the clock (samples). */
  get trackEnds(): Record<RecordingTrack, number> {
    return { caller: this.tracks.caller.end, agent: this.tracks.agent.end };
  }

  private pendingSamples(t: TrackState): number {
    return t.pending.reduce((n, r) => n + r.samples, 0);
  }

  /**
   * Turns the track's pending runs into chunks (one per run) queued for the spool. Cut by
   * size, a run opened within `jitterMs` after a gap stays pending: a burst may still be
   * arriving, and a spooled run can no longer slide back.
   */
  private cut(track: RecordingTrack, bySize = false): void {
    const t = this.tracks[track];
    const young = t.pending.at(-1);
    const keep = bySize && young && young.startSample > young.floor && this.clockSample - young.openedAt <= this.jitterSamples ? t.pending.pop() : undefined;
    for (const run of t.pending.splice(0, t.pending.length)) {
      const pcm = new Int16Array(run.samples);
      let at = 0;
      for (const p of run.pieces) {
        pcm.set(p, at);
        at += p.length;
      }
      this.unsaved.push({ track, seq: t.nextSeq++, startSample: run.startSample, pcm: pcmBytes(pcm) });
    }
    if (keep) t.pending.push(keep);
  }

  private cutAll(): void {
    for (const track of RECORDING_TRACKS) this.cut(track);
    this.schedule();
  }

  /** Queues a spool write of what is unsaved after the running one (a failed one's chunks included: retried). */
  private schedule(): void {
    if (!this.unsaved.length) return;
    const next = this.saving.catch(() => undefined).then(() => this.save());
    // Reported here, so a write nobody awaits (cut by size or by the timer) is never an unhandled rejection.
    next.catch((err: unknown) => this.opts.onError?.(err));
    this.saving = next;
  }

  /** Stores the queued chunks in order; stops at the first failure (those chunks stay queued). */
  private async save(): Promise<void> {
    while (this.unsaved.length) {
      const c = this.unsaved[0];
      try {
        await this.spool.saveChunk(c.track, c.seq, c.startSample, c.pcm);
      } catch (err) {
        throw new RecordingError('a recording chunk could not be stored', err instanceof Error ? err.message : String(err));
      }
      this.unsaved.shift();
    }
  }
}

// ---------------------------------------------------------------------------------------
// Finalizing

export interface RecordingFile {
  path: string;
  format: 'ogg' | 'wav';
  mime: 'audio/ogg' | 'audio/wav';
  channels: 1 | 2;
  /** The call's length on the recording clock (all three files are this long). */
  durationMs: number;
  bytes: number;
}

export interface FinalizedRecordings {
  caller: RecordingFile;
  agent: RecordingFile;
  /** Stereo: left caller, right agent. */
  combined: RecordingFile;
}

export interface FinalizeOptions {
  /** Where the three files are written (default: a new temporary directory). */
  dir?: string;
  /** The ffmpeg executable (default `ffmpeg` on PATH). */
  ffmpeg?: string;
  /** 'opus' (Ogg/Opus, fails without libopus), 'wav', or 'auto' (Opus when ffmpeg has libopus, else WAV; the default). */
  format?: 'auto' | 'opus' | 'wav';
  /** Sample rate of the spooled PCM (MEDIA_RATE). */
  sampleRate?: number;
}

const opusSupport = new Map<string, Promise<boolean>>();

/** Whether this ffmpeg has the libopus encoder (`ffmpeg -encoders`), asked once per executable. */
export function ffmpegHasLibopus(ffmpeg = 'ffmpeg'): Promise<boolean> {
  let known = opusSupport.get(ffmpeg);
  if (!known) {
    known = run(ffmpeg, ['-hide_banner', '-encoders']).then(
      (out) => /^\s*A\S*\s+libopus\s/m.test(out),
      () => false,
    );
    opusSupport.set(ffmpeg, known);
  }
  return known;
}

/**
 * The call's three recording files from what was spooled (a call that ended normally or
 * a worker that died mid-call: the same). Chunks are laid out on the clock in a raw file
 * (positional writes, so gaps are zeros and memory holds one chunk), then ffmpeg encodes.
 * Every file is as long as the call's furthest track. Null when nothing was recorded.
 */
export async function finalizeRecordings(spool: Pick<RecordingSpool, 'chunks'>, opts: FinalizeOptions = {}): Promise<FinalizedRecordings | null> {
  const ffmpeg = opts.ffmpeg ?? 'ffmpeg';
  const rate = opts.sampleRate ?? MEDIA_RATE;
  const format = opts.format ?? 'auto';
  const opus = format === 'opus' || (format === 'auto' && (await ffmpegHasLibopus(ffmpeg)));
  const dir = opts.dir ?? (await fs.promises.mkdtemp(path.join(os.tmpdir(), 'concierge-recording-')));
  await fs.promises.mkdir(dir, { recursive: true });
  const work = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'concierge-recording-raw-'));
  try {
    const raw: Record<RecordingTrack, string> = { caller: path.join(work, 'caller.raw'), agent: path.join(work, 'agent.raw') };
    let total = 0;
    for (const track of RECORDING_TRACKS) total = Math.max(total, await layOut(spool, track, raw[track]));
    if (total === 0) return null;
    // Both tracks as long as the call, so the stereo file's channels line up and end together.
    for (const track of RECORDING_TRACKS) await fs.promises.truncate(raw[track], total * 2);

    const ext = opus ? 'ogg' : 'wav';
    const codec = opus ? ['-c:a', 'libopus', '-application', 'voip'] : ['-c:a', 'pcm_s16le'];
    const input = (file: string) => ['-f', 's16le', '-ar', String(rate), '-ac', '1', '-i', file];
    const out = (name: string) => path.join(dir, `${name}.${ext}`);
    const common = ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y'];
    for (const track of RECORDING_TRACKS) {
      await run(ffmpeg, [...common, ...input(raw[track]), ...codec, ...(opus ? ['-b:a', '16k'] : []), out(track)]);
    }
    await run(ffmpeg, [
      ...common, ...input(raw.caller), ...input(raw.agent),
      '-filter_complex', '[0:a][1:a]join=inputs=2:channel_layout=stereo[a]', '-map', '[a]',
      ...codec, ...(opus ? ['-b:a', '24k'] : []), out('combined'),
    ]);
    const durationMs = Math.round((total * 1000) / rate);
    const file = async (name: string, channels: 1 | 2): Promise<RecordingFile> => ({
      path: out(name),
      format: ext,
      mime: opus ? 'audio/ogg' : 'audio/wav',
      channels,
      durationMs,
      bytes: (await fs.promises.stat(out(name))).size,
    });
    return { caller: await file('caller', 1), agent: await file('agent', 1), combined: await file('combined', 2) };
  } finally {
    await fs.promises.rm(work, { recursive: true, force: true });
  }
}

/** Writes the track's chunks at their clock positions into `file`; returns the track's end (samples). */
async function layOut(spool: Pick<RecordingSpool, 'chunks'>, track: RecordingTrack, file: string): Promise<number> {
  const handle = await fs.promises.open(file, 'w');
  let end = 0;
  try {
    for await (const chunk of spool.chunks(track)) {
      await handle.write(chunk.pcm, 0, chunk.pcm.length, chunk.startSample * 2);
      end = Math.max(end, chunk.startSample + Math.floor(chunk.pcm.length / 2));
    }
  } finally {
    await handle.close();
  }
  return end;
}

/**
 * Runs a command; resolves with its stdout, rejects with a RecordingError carrying the last 4000 characters of its
 * stderr. The process is started from the spawn thread (lib/process/spawn-thread.ts): a spawn from the voice worker's
 * main thread held it 30-60 ms per start, the 20 ms pacing of every live call's audio with it.
 */
async function run(cmd: string, args: string[]): Promise<string> {
  const r = await runCommand(cmd, args, { stderrTail: 4000 });
  if (!r.started) {
    const missing = r.error.code === 'ENOENT';
    throw new RecordingError(missing ? 'recordings need ffmpeg, which is not installed' : 'ffmpeg could not start', r.error.message, !missing);
  }
  if (r.code !== 0) throw new RecordingError('ffmpeg could not encode the recording', r.stderr.trim() || `exit ${r.code}`, false);
  return r.stdout.toString('utf8');
}
