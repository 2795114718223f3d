import { concatFrames } from '../../lib/audio/audio';
import { execFileSync } from 'node:child_process';
import { MediaStreamTrack, RTCPeerConnection, RtpHeader, RtpPacket, usePCMU } from 'werift';
import { decodeMulaw, encodeMulaw, wavToMono } from '../../lib/audio/audio';
import { DirectLeg } from '../../providers/webrtc/direct-peer';
import { policyFromCidrs } from '../../lib/net/ssrf';
import { LOCAL_ICE_CIDRS } from './ice';
import { FRAME_MS, FRAME_SAMPLES, MEDIA_RATE, type DialOutInput, type MediaLeg, type Telephony, type TranscriptFrame } from '../../domain/ports/voice';

/**
 * The test's phone network. No SIP trunk or LiveKit media server exists here, so a dialled
 * number rings a local handset: a werift WebRTC peer on loopback that offers PCMU (G.711
 * μ-law, what a phone line carries), answered by the agent's own DirectLeg: real RTP
 * over UDP both ways, with ICE and DTLS-SRTP. Like a phone, the handset sends a frame
 * every 20 ms for as long as the line is up (speech, else silence). Hanging up is
 * signalled out of band, as a SIP BYE is: the handset's hang-up ends the agent's leg,
 * and the agent's hang-up (the leg closed) ends the handset's call.
 *
 * Numbers `forward` claims are dialled through another Telephony instead (the LiveKit SIP
 * client against the fake LiveKit, for the busy / no-answer mappings).
 */

/** The other end of one call, as a test scripts it. */
export class Handset {
  /** Everything the agent said, as the handset received it (MEDIA_RATE PCM, in order). */
  readonly heard: Int16Array[] = [];
  /** When the agent's audio last carried speech (the agent sends no RTP between its turns). */
  private lastLoudAt = 0;
  private loudFrames = 0;
  private readonly queue: Int16Array[] = [];
  private drained: Array<() => void> = [];
  private hangUpWith!: (by: 'phone' | 'agent') => void;
  /** Who hung up, once the call is over. */
  readonly hungUp: Promise<'phone' | 'agent'>;
  private over = false;

  constructor(readonly to: string) {
    this.hungUp = new Promise((resolve) => (this.hangUpWith = resolve));
  }

  /** Speaks `pcm` (MEDIA_RATE mono) into the line; resolves once it has all been sent. */
  say(pcm: Int16Array): Promise<void> {
    for (let i = 0; i < pcm.length; i += FRAME_SAMPLES) {
      const frame = new Int16Array(FRAME_SAMPLES);
      frame.set(pcm.subarray(i, Math.min(pcm.length, i + FRAME_SAMPLES)));
      this.queue.push(frame);
    }
    return new Promise((resolve) => this.drained.push(resolve));
  }

  /**
   * Waits until the agent has spoken and then been quiet for `quietMs` (the answer is
   * over); the agent's audio heard meanwhile. Rejects after `timeoutMs`.
   */
  async agentAnswer(opts: { quietMs?: number; timeoutMs?: number } = {}): Promise<Int16Array> {
    const quietMs = opts.quietMs ?? 1500;
    const start = this.heard.length;
    const loudBefore = this.loudFrames;
    const until = Date.now() + (opts.timeoutMs ?? 60_000);
    for (;;) {
      if (this.loudFrames > loudBefore && Date.now() - this.lastLoudAt >= quietMs) return concat(this.heard.slice(start));
      if (this.over) throw new Error('the call ended before the agent answered');
      if (Date.now() > until) throw new Error('the agent did not answer in time');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** @internal a frame of the agent's audio arrived. */
  received(frame: Int16Array): void {
    this.heard.push(frame);
    if (peak(frame) > 1000) {
      this.loudFrames++;
      this.lastLoudAt = Date.now();
    }
  }

  /** The phone side hangs up. */
  hangUp(): void {
    this.end('phone');
  }

  /** @internal the next 20 ms frame the handset sends: queued speech, else silence. */
  nextFrame(): Int16Array {
    const frame = this.queue.shift() ?? new Int16Array(FRAME_SAMPLES);
    if (!this.queue.length && this.drained.length) for (const done of this.drained.splice(0)) done();
    return frame;
  }

  /** @internal */
  end(by: 'phone' | 'agent'): void {
    if (this.over) return;
    this.over = true;
    for (const done of this.drained.splice(0)) done();
    this.hangUpWith(by);
  }

  get ended(): boolean {
    return this.over;
  }
}

/** The agent's side of a handset call: the DirectLeg, ended by the handset's hang-up (the "BYE"), and hanging the handset up when closed. */
class PhoneLeg implements MediaLeg {
  readonly ended: Promise<string>;

  constructor(
    private readonly inner: DirectLeg,
    private readonly handset: Handset,
  ) {
    this.ended = Promise.race([inner.ended, handset.hungUp.then((by) => (by === 'phone' ? 'remote_hung_up' : 'closed'))]);
  }

  onAudio(listener: (frame: Int16Array) => void): void {
    this.inner.onAudio(listener);
  }
  play(samples: Int16Array): void {
    this.inner.play(samples);
  }
  clearPlayback(): void {
    this.inner.clearPlayback();
  }
  get playing(): boolean {
    return this.inner.playing;
  }
  onPlayed(listener: (frame: Int16Array, aheadMs: number) => void): void {
    this.inner.onPlayed(listener);
  }
  setSendAhead(ms: number | null): void {
    this.inner.setSendAhead(ms);
  }
  sendTranscript(_frame: TranscriptFrame): void {
    // A phone line has no data channel.
  }
  async close(): Promise<void> {
    this.handset.end('agent');
    await this.inner.close();
  }
}

export interface TestPhoneOptions {
  /** What the handset does once answered (runs in the background; the call is up until someone hangs up). */
  script: (handset: Handset) => Promise<void>;
  /** How long a number rings before the handset answers. */
  ringMs?: number;
  /** Numbers dialled through another telephony instead. */
  forward?: (to: string) => Telephony | null;
}

export class TestPhone implements Telephony {
  readonly kind = 'sip' as const;
  /** Every handset that answered, in order. */
  readonly handsets: Handset[] = [];
  /** Errors the handset scripts threw (a test asserts there are none). */
  readonly scriptErrors: unknown[] = [];
  /** Every number dialled (the INVITEs sent), in order, forwarded or not. */
  readonly dialled: string[] = [];

  constructor(private readonly o: TestPhoneOptions) {}

  async dial(input: DialOutInput, progress: (status: 'ringing' | 'in_progress') => void, signal: AbortSignal): Promise<MediaLeg> {
    this.dialled.push(input.to);
    const other = this.o.forward?.(input.to);
    if (other) return other.dial(input, progress, signal);
    progress('ringing');
    await new Promise((r) => setTimeout(r, this.o.ringMs ?? 300));
    signal.throwIfAborted();

    // The handset offers like a phone's media leg: one PCMU audio stream, sendrecv.
    const pc = new RTCPeerConnection({ codecs: { audio: [usePCMU()], video: [] }, bundlePolicy: 'max-bundle' });
    const mic = new MediaStreamTrack({ kind: 'audio' });
    pc.addTransceiver(mic, { direction: 'sendrecv' });
    const handset = new Handset(input.to);
    pc.onTrack.subscribe((track) => track.onReceiveRtp.subscribe((rtp) => handset.received(decodeMulaw(rtp.payload))));
    await pc.setLocalDescription(await pc.createOffer());
    if (pc.iceGatheringState !== 'complete') await pc.iceGatheringStateChange.watch((s) => s === 'complete');
    const { answerSdp, leg, connected } = await DirectLeg.answer(pc.localDescription!.sdp, { connectTimeoutMs: 10_000, candidatePolicy: policyFromCidrs(LOCAL_ICE_CIDRS) });
    await pc.setRemoteDescription({ type: 'answer', sdp: answerSdp });
    try {
      await connected;
    } catch (err) {
      await pc.close();
      await leg.close();
      throw err;
    }
    this.handsets.push(handset);

    // A frame every 20 ms while the line is up, on the wall clock.
    let seq = 1;
    let ts = 0;
    const started = Date.now();
    let sent = 0;
    const pump = setInterval(() => {
      const due = Math.floor((Date.now() - started) / FRAME_MS);
      while (sent < due && !handset.ended) {
        const frame = handset.nextFrame();
        mic.writeRtp(new RtpPacket(new RtpHeader({ payloadType: 0, sequenceNumber: seq++ & 0xffff, timestamp: ts >>> 0, marker: sent === 0 }), Buffer.from(encodeMulaw(frame))));
        ts += FRAME_SAMPLES;
        sent++;
      }
    }, 10);
    void handset.hungUp.then(async () => {
      clearInterval(pump);
      await pc.close().catch(() => undefined);
    });
    progress('in_progress');
    void this.o.script(handset).catch((err: unknown) => {
      this.scriptErrors.push(err);
      handset.hangUp();
    });
    return new PhoneLeg(leg, handset);
  }
}

/** `text` spoken by Debian's espeak-ng, as MEDIA_RATE mono PCM (what a phone line carries). */
export function spokenPcm(text: string): Int16Array {
  return wavToMono(execFileSync('espeak-ng', ['--stdout', '-v', 'en-us', '-s', '150'], { input: text }), MEDIA_RATE);
}

function peak(frame: Int16Array): number {
  let m = 0;
  for (const s of frame) m = Math.max(m, Math.abs(s));
  return m;
}

export const concat = concatFrames;
