import dgram from 'node:dgram';
import { RtpHeader, RtpPacket } from 'werift';
import { decodeAlaw, decodeMulaw, encodeAlaw, encodeMulaw } from '../audio/audio';
import { PacedLeg } from '../audio/paced-leg';
import { FRAME_MS, FRAME_SAMPLES, type TranscriptFrame } from '../audio/media-leg';
import { PCMA, PCMU, type G711 } from './sdp';

/** Where our RTP goes and in which codec (the SDP answer). */
export interface RtpPeer {
  address: string;
  port: number;
  payloadType: G711;
}

/**
 * Binds the UDP socket of one call's RTP on `host`: an even port from `range` (RTP's
 * convention; RTCP, which we do not send, would take the odd one above), else any port.
 */
export async function bindRtpSocket(host: string, range?: [number, number]): Promise<dgram.Socket> {
  const bind = (port: number) =>
    new Promise<dgram.Socket>((resolve, reject) => {
      const socket = dgram.createSocket('udp4');
      socket.once('error', (err) => {
        socket.close();
        reject(err);
      });
      socket.bind(port, host, () => {
        socket.removeAllListeners('error');
        resolve(socket);
      });
    });
  if (!range) return bind(0);
  const [lo, hi] = range;
  const first = lo + (lo % 2);
  const slots = Math.floor((hi - first) / 2) + 1;
  const start = Math.floor(Math.random() * slots);
  // Every even port of the range once, from a random one (calls at once spread out).
  for (let i = 0; i < slots; i++) {
    try {
      return await bind(first + ((start + i) % slots) * 2);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    }
  }
  throw new Error(`no free even UDP port in ${lo}-${hi} for RTP`);
}

/** A gap in the far end's RTP this long is silence (it suppresses silence, or sends comfort noise only). */
const GAP_MS = 100;

/**
 * The media of one answered SIP call: G.711 RTP over UDP to the address the SDP answer
 * gave, paced by PacedLeg. Between the agent's turns the leg keeps sending silence every
 * 20 ms, as a phone does: carriers hang up calls whose RTP stops (media timeouts), and a
 * NAT in front of us only lets the far end's RTP in while ours flows out. The other way,
 * a far end that stops sending (silence suppression, comfort noise) is heard as silence
 * frames on the 20 ms clock, so the listener's VAD sees the caller's turn end. A phone
 * line has no data channel, so transcript frames are dropped. Packets from any address
 * but the SDP answer's are ignored. `hangUp` (the dialog's
 * BYE) runs on close unless the far end hung up first.
 */
export class RtpLeg extends PacedLeg {
  private sequence = Math.floor(Math.random() * 0xffff);
  private timestamp = Math.floor(Math.random() * 0xffffffff);
  private readonly ssrc = Math.floor(Math.random() * 0xffffffff);
  /** Received samples not yet a whole frame (a peer may packetise at 10 or 30 ms). */
  private pending = new Int16Array(0);
  private silenceDue = Date.now();
  /** When the far end's next frame is overdue (0 until its first packet). */
  private heardDue = 0;
  private readonly clock: NodeJS.Timeout;
  private over = false;
  private remoteGone = false;
  /** Packets received and sent, for logs and tests. */
  readonly stats = { received: 0, sent: 0 };

  constructor(
    private readonly socket: dgram.Socket,
    private readonly peer: RtpPeer,
    private readonly hangUp: () => Promise<void>,
  ) {
    super();
    socket.on('message', (buf, from) => {
      // Only the far end's media address may speak into the call (no RTP injection by whoever finds the port).
      if (from.address === peer.address) this.onPacket(buf);
    });
    socket.on('error', () => undefined);
    this.clock = setInterval(this.keepAlive, FRAME_MS / 2);
  }

  /** Our RTP socket's address (what the SDP offer announced). */
  get localPort(): number {
    return this.socket.address().port;
  }

  get payloadType(): G711 {
    return this.peer.payloadType;
  }

  private onPacket(buf: Buffer): void {
    // RTP version 2, a 12-byte header at least; anything else on the port is ignored.
    if (buf.length < 12 || buf[0] >> 6 !== 2) return;
    let packet: RtpPacket;
    try {
      packet = RtpPacket.deSerialize(buf);
    } catch {
      return;
    }
    const pt = packet.header.payloadType;
    // Comfort noise, DTMF events and anything unknown carry no speech we can decode.
    if ((pt !== PCMU && pt !== PCMA) || packet.payload.length === 0) return;
    this.stats.received++;
    this.heardDue = Date.now() + GAP_MS;
    const pcm = pt === PCMU ? decodeMulaw(packet.payload) : decodeAlaw(packet.payload);
    let samples = pcm;
    if (this.pending.length) {
      samples = new Int16Array(this.pending.length + pcm.length);
      samples.set(this.pending);
      samples.set(pcm, this.pending.length);
    }
    let i = 0;
    for (; i + FRAME_SAMPLES <= samples.length; i += FRAME_SAMPLES) this.received(samples.slice(i, i + FRAME_SAMPLES));
    this.pending = samples.slice(i);
  }

  protected sendFrame(frame: Int16Array, marker: boolean): void {
    // Our own timestamp runs on without gaps: the silence between turns is sent too.
    this.send(frame, marker);
    this.silenceDue = Date.now() + FRAME_MS;
  }

  private send(frame: Int16Array, marker: boolean): void {
    if (this.over) return;
    this.sequence = (this.sequence + 1) & 0xffff;
    const header = new RtpHeader({ payloadType: this.peer.payloadType, sequenceNumber: this.sequence, timestamp: this.timestamp >>> 0, ssrc: this.ssrc, marker });
    this.timestamp = (this.timestamp + FRAME_SAMPLES) >>> 0;
    const payload = Buffer.from(this.peer.payloadType === PCMU ? encodeMulaw(frame) : encodeAlaw(frame));
    this.socket.send(new RtpPacket(header, payload).serialize(), this.peer.port, this.peer.address);
    this.stats.sent++;
  }

  private readonly keepAlive = (): void => {
    if (this.over) return;
    const now = Date.now();
    if (this.heardDue && now >= this.heardDue) {
      // The far end went quiet GAP_MS ago: silence frames on our 20 ms clock until its RTP resumes.
      if (now - this.heardDue > 200) this.heardDue = now;
      while (this.heardDue <= now) {
        this.received(new Int16Array(FRAME_SAMPLES));
        this.heardDue += FRAME_MS;
      }
    }
    if (this.playing) return;
    // After a stall (a busy event loop), carry on from now rather than burst.
    if (now - this.silenceDue > 200) this.silenceDue = now;
    const silence = new Int16Array(FRAME_SAMPLES);
    while (this.silenceDue <= now) {
      this.send(silence, false);
      this.silenceDue += FRAME_MS;
    }
  };

  sendTranscript(_frame: TranscriptFrame): void {
    // A phone line has no data channel.
  }

  /** The far end hung up (its BYE): the leg ends with `reason`, and close() sends no BYE. */
  remoteHungUp(reason: string): void {
    this.remoteGone = true;
    this.end(reason);
  }

  protected override end(reason: string): void {
    this.over = true;
    clearInterval(this.clock);
    super.end(reason);
  }

  private released = false;

  protected async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    try {
      if (!this.remoteGone) await this.hangUp();
    } finally {
      this.socket.close();
    }
  }
}
