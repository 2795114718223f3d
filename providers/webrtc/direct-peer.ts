import { MediaStreamTrack, RTCPeerConnection, RtpHeader, RtpPacket, usePCMU, type RTCDataChannel } from 'werift';
import type { AddressPolicy } from '../../lib/net/ssrf';
import { decodeMulaw, encodeMulaw } from '../../lib/audio/audio';
import { filterOfferCandidates } from './ice';
import { PacedLeg } from '../../lib/audio/paced-leg';
import { FRAME_SAMPLES, type TranscriptFrame } from '../../domain/ports/voice';

/** PCMU's static RTP payload type (RFC 3551). */
const PCMU_PT = 0;

export interface DirectPeerOptions {
  /** STUN/TURN servers for the agent's side (VOICE_ICE_SERVERS); none on a LAN or loopback. */
  iceServers?: Array<{ urls: string }>;
  /** UDP port range for media (VOICE_RTP_PORTS), e.g. behind a firewall. */
  portRange?: [number, number];
  /** Extra host addresses to announce (VOICE_PUBLIC_IP: the worker's public address behind NAT). */
  announce?: string[];
  /** How long the browser has to connect after the answer. */
  connectTimeoutMs?: number;
  /**
   * Which of the offer's ICE candidates may be contacted (VOICE_ICE_ALLOW_CIDRS on top of
   * public addresses); absent: public addresses only. Tests on one machine allow its own.
   */
  candidatePolicy?: AddressPolicy;
}

/**
 * The agent's own WebRTC peer for the direct transport (werift, pure TypeScript): one
 * visitor ↔ one agent needs no SFU. It answers the browser's offer (non-trickle: the
 * answer carries every candidate), sends and receives audio as G.711 μ-law (PCMU, which
 * every browser offers) and takes the browser's data channel labelled `transcript` for
 * the transcript frames.
 */
export class DirectLeg extends PacedLeg {
  private channel: RTCDataChannel | null = null;
  private readonly outgoing = new MediaStreamTrack({ kind: 'audio' });
  private sequence = Math.floor(Math.random() * 0xffff);

  private constructor(private readonly pc: RTCPeerConnection) {
    super();
  }

  /** Answers an offer; `connected` resolves when media and the channel can flow. */
  static async answer(offerSdp: string, opts: DirectPeerOptions = {}): Promise<{ answerSdp: string; leg: DirectLeg; connected: Promise<void> }> {
    const pc = new RTCPeerConnection({
      codecs: { audio: [usePCMU()], video: [] },
      iceServers: opts.iceServers ?? [],
      ...(opts.portRange ? { icePortRange: opts.portRange } : {}),
      ...(opts.announce?.length ? { iceAdditionalHostAddresses: opts.announce } : {}),
    });
    const leg = new DirectLeg(pc);
    pc.onDataChannel.subscribe((channel) => {
      if (channel.label === 'transcript') leg.channel = channel;
    });
    pc.onTrack.subscribe((track) => {
      if (track.kind !== 'audio') return;
      track.onReceiveRtp.subscribe((rtp) => {
        if (rtp.header.payloadType !== PCMU_PT || rtp.payload.length === 0) return;
        const pcm = decodeMulaw(rtp.payload);
        for (let i = 0; i < pcm.length; i += FRAME_SAMPLES) leg.received(pcm.subarray(i, Math.min(pcm.length, i + FRAME_SAMPLES)));
      });
    });
    // The visitor's candidates are filtered before werift sees them: it would send STUN to any address named.
    const offer = filterOfferCandidates(offerSdp, opts.candidatePolicy ?? { allow: null });
    await pc.setRemoteDescription({ type: 'offer', sdp: offer.sdp });
    const audio = pc.getTransceivers().find((t) => t.kind === 'audio' && !t.rejected);
    if (!audio) {
      await pc.close();
      throw new Error('the offer has no audio this peer can take (PCMU)');
    }
    audio.setDirection('sendrecv');
    await audio.sender.replaceTrack(leg.outgoing);
    await pc.setLocalDescription(await pc.createAnswer());
    if (pc.iceGatheringState !== 'complete') await pc.iceGatheringStateChange.watch((s) => s === 'complete');
    const connected = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the browser did not connect in time')), opts.connectTimeoutMs ?? 20_000);
      pc.connectionStateChange.subscribe((state) => {
        if (state === 'connected') {
          clearTimeout(timer);
          resolve();
        } else if (state === 'failed' || state === 'closed' || state === 'disconnected') {
          clearTimeout(timer);
          reject(new Error(`connection ${state}`));
          leg.end(state === 'closed' ? 'remote_left' : `connection_${state}`);
        }
      });
    });
    connected.catch(() => undefined);
    return { answerSdp: pc.localDescription!.sdp, leg, connected };
  }

  protected sendFrame(frame: Int16Array, marker: boolean, rtpTimestamp: number): void {
    this.sequence = (this.sequence + 1) & 0xffff;
    const header = new RtpHeader({ payloadType: PCMU_PT, sequenceNumber: this.sequence, timestamp: rtpTimestamp, marker });
    this.outgoing.writeRtp(new RtpPacket(header, Buffer.from(encodeMulaw(frame))));
  }

  sendTranscript(frame: TranscriptFrame): void {
    if (this.channel?.readyState === 'open') this.channel.send(JSON.stringify(frame));
  }

  /** Whether the browser's `transcript` channel is open. */
  get channelOpen(): boolean {
    return this.channel?.readyState === 'open';
  }

  protected async release(): Promise<void> {
    await this.pc.close().catch(() => undefined);
  }
}
