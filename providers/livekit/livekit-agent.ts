import type { AudioSource, RemoteParticipant, RemoteTrack, Room } from '@livekit/rtc-node' with { 'resolution-mode': 'import' };
import { FRAME_SAMPLES, MEDIA_RATE, type MediaLeg, type TranscriptFrame } from '../../domain/ports/voice';

/**
 * The agent's side of a LiveKit room, over @livekit/rtc-node (LiveKit's Rust SDK through
 * its prebuilt FFI library). Imported lazily: nothing here loads the native library
 * until an agent actually joins. Audio crosses at MEDIA_RATE both ways: the SDK's
 * AudioSource takes 8 kHz frames and its AudioStream resamples the remote track to
 * 8 kHz mono 20 ms frames, so no resampler of ours sits at this edge.
 *
 * Not exercised by the tests: there is no LiveKit server here to join.
 */

// The ESM build: what import() loads from this CommonJS module at run time.
export type Rtc = typeof import('@livekit/rtc-node', { with: { 'resolution-mode': 'import' } });

let rtcModule: Promise<Rtc> | undefined;
export function loadRtc(): Promise<Rtc> {
  return (rtcModule ??= import('@livekit/rtc-node'));
}

/** Agent audio LiveKit may hold before captureFrame waits: what a barge-in can still let through. */
const SOURCE_QUEUE_MS = 100;
const TRANSCRIPT_TOPIC = 'transcript';

export interface ConnectAgentInput {
  url: string;
  token: string;
  /** The participant whose audio the leg carries; unset: the first remote participant. */
  remoteIdentity?: string;
  signal: AbortSignal;
}

/** Connects, publishes the agent's microphone, and resolves once the remote party is in the room. */
export async function connectAgent(input: ConnectAgentInput): Promise<LiveKitAgentLeg> {
  input.signal.throwIfAborted();
  const rtc = await loadRtc();
  const room = new rtc.Room();
  const leg = new LiveKitAgentLeg(rtc, room, input.remoteIdentity);
  // An abort while connecting closes the room, which fails the connect.
  const onAbort = () => void leg.close();
  input.signal.addEventListener('abort', onAbort, { once: true });
  try {
    await room.connect(input.url, input.token, { autoSubscribe: true, dynacast: false });
    input.signal.throwIfAborted();
    await leg.publish();
    await leg.remoteJoined(input.signal);
    return leg;
  } catch (err) {
    await leg.close();
    throw err;
  } finally {
    input.signal.removeEventListener('abort', onAbort);
  }
}

/** A MediaLeg over a LiveKit room; built by connectAgent (exported for its playback tests, which need no server). */
export class LiveKitAgentLeg implements MediaLeg {
  readonly ended: Promise<string>;
  private endWith!: (reason: string) => void;
  private readonly listeners: Array<(frame: Int16Array) => void> = [];
  /** 20 ms frames not yet handed to the AudioSource. */
  private pending: Int16Array[] = [];
  /** A partial frame carried to the next play(). */
  private carry = new Int16Array(0);
  private pumping = false;
  private readonly source: AudioSource;
  private remote?: RemoteParticipant;
  private remoteArrived?: () => void;
  private closed = false;
  private readonly encoder = new TextEncoder();

  constructor(
    private readonly rtc: Rtc,
    private readonly room: Room,
    private readonly remoteIdentity: string | undefined,
  ) {
    this.ended = new Promise((resolve) => (this.endWith = resolve));
    this.source = new rtc.AudioSource(MEDIA_RATE, 1, SOURCE_QUEUE_MS);
    room.on(rtc.RoomEvent.ParticipantConnected, (p) => this.adopt(p));
    room.on(rtc.RoomEvent.TrackSubscribed, (track, _pub, p) => {
      if (p === this.remote || this.adopt(p)) this.listen(track);
    });
    room.on(rtc.RoomEvent.ParticipantDisconnected, (p) => {
      if (p === this.remote) this.endWith('remote_left');
    });
    room.on(rtc.RoomEvent.Disconnected, (reason) => this.endWith(`room_closed:${rtc.DisconnectReason[reason] ?? reason}`));
  }

  /** Takes `p` as the remote party if it is the one expected and none is taken yet. */
  private adopt(p: RemoteParticipant): boolean {
    if (this.remote) return false;
    if (this.remoteIdentity && p.identity !== this.remoteIdentity) return false;
    this.remote = p;
    this.remoteArrived?.();
    return true;
  }

  async publish(): Promise<void> {
    const rtc = this.rtc;
    const track = rtc.LocalAudioTrack.createAudioTrack('agent', this.source);
    await this.room.localParticipant!.publishTrack(track, new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_MICROPHONE }));
  }

  remoteJoined(signal: AbortSignal): Promise<void> {
    for (const p of this.room.remoteParticipants.values()) this.adopt(p);
    if (this.remote) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal.reason ?? new Error('aborted'));
      signal.addEventListener('abort', onAbort, { once: true });
      this.remoteArrived = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      void this.ended.then((reason) => reject(new Error(`the room closed before the remote party joined (${reason})`)));
    });
  }

  private listen(track: RemoteTrack): void {
    if (track.kind !== this.rtc.TrackKind.KIND_AUDIO) return;
    const stream = new this.rtc.AudioStream(track, { sampleRate: MEDIA_RATE, numChannels: 1, frameSizeMs: 20 });
    void (async () => {
      let rest = new Int16Array(0);
      for await (const frame of stream) {
        if (this.closed) break;
        // Re-cut into exact 160-sample frames, whatever size the stream delivers.
        let buf = rest.length ? concat(rest, frame.data) : frame.data;
        while (buf.length >= FRAME_SAMPLES) {
          const out = buf.slice(0, FRAME_SAMPLES);
          for (const l of this.listeners) l(out);
          buf = buf.subarray(FRAME_SAMPLES);
        }
        rest = buf.slice();
      }
    })().catch(() => undefined);
  }

  onAudio(listener: (frame: Int16Array) => void): void {
    this.listeners.push(listener);
  }

  private readonly played: Array<(frame: Int16Array, aheadMs: number) => void> = [];

  /** Frames are handed over as LiveKit's queue takes them: its own pacing plays them at once (ahead 0). */
  onPlayed(listener: (frame: Int16Array, aheadMs: number) => void): void {
    this.played.push(listener);
  }

  play(samples: Int16Array): void {
    let buf = this.carry.length ? concat(this.carry, samples) : samples;
    while (buf.length >= FRAME_SAMPLES) {
      this.pending.push(buf.slice(0, FRAME_SAMPLES));
      buf = buf.subarray(FRAME_SAMPLES);
    }
    this.carry = buf.slice();
    void this.pump();
  }

  /** Hands frames to the AudioSource; captureFrame waits while LiveKit's queue is full, which paces playback in real time. */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (let frame = this.pending.shift(); frame && !this.closed; frame = this.pending.shift()) {
        await this.source.captureFrame(new this.rtc.AudioFrame(frame, MEDIA_RATE, 1, FRAME_SAMPLES));
        for (const l of this.played) l(frame, 0);
      }
    } catch {
      // A closed source or room: the leg is ending; ended reports why.
    } finally {
      this.pumping = false;
    }
  }

  clearPlayback(): void {
    this.pending = [];
    this.carry = new Int16Array(0);
    this.source.clearQueue();
  }

  get playing(): boolean {
    return this.pending.length > 0 || this.source.queuedDuration > 0;
  }

  sendTranscript(frame: TranscriptFrame): void {
    const local = this.room.localParticipant;
    if (this.closed || !this.room.isConnected || !local) return;
    const payload = this.encoder.encode(JSON.stringify(frame));
    void local.publishData(payload, { topic: TRANSCRIPT_TOPIC, reliable: true }).catch(() => undefined);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pending = [];
    this.endWith('closed');
    await this.source.close().catch(() => undefined);
    await this.room.disconnect().catch(() => undefined);
  }
}

function concat(a: Int16Array, b: Int16Array): Int16Array {
  const out = new Int16Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
