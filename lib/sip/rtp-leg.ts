import dgram from 'node:dgram';
import { RtpHeader, RtpPacket } from 'werift';
import { decodeAlaw, decodeMulaw, encodeAlaw, encodeMulaw } from '../audio/audio';
import { decodeTelephoneEvent, DTMF_DIGITS, dtmfDigit, encodeTelephoneEvent, telephoneEventPackets } from '../audio/dtmf';
import { PacedLeg } from '../audio/paced-leg';
import { FRAME_MS, FRAME_SAMPLES, type TranscriptFrame } from '../audio/media-leg';
import { PCMA, PCMU, type G711 } from './sdp';

/** Where our RTP goes and in which codec (the SDP answer). */
export interface RtpPeer {
  address: string;
  port: number;
  payloadType: G711;
  /** The answer's telephone-event payload type (RFC 4733); absent: digits can be neither sent nor received as events. */
  dtmfPayloadType?: number;
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
 *
 * Keypad digits (RFC 4733, when the answer took telephone-event): the far end's events
 * are reported once per key press (an event is its RTP timestamp: its updates and the
 * three copies of its end are the same press) to `onDigit` listeners; `sendDigits` sends
 * ours, each an event of 160 ms (an update every 20 ms, the end three times) then 80 ms
 * of silence, in place of the audio: agent speech due meanwhile is not sent.
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
  private readonly digitListeners: Array<(digit: string) => void> = [];
  /** The RTP timestamp of the far end's last telephone-event (one key press). */
  private lastEventTimestamp: number | null = null;
  /** Our digits being sent: audio waits. */
  private sendingDigits = false;
  private digitQueue: Promise<void> = Promise.resolve();
  /** Transfers the call (set by the telephony that owns the dialog: SIP REFER). */
  transfer?: (target: string) => Promise<{ ok: boolean; status: number; reason: string }>;

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
    if (this.peer.dtmfPayloadType !== undefined && pt === this.peer.dtmfPayloadType) {
      this.onTelephoneEvent(packet);
      return;
    }
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

  private onTelephoneEvent(packet: RtpPacket): void {
    const event = decodeTelephoneEvent(packet.payload);
    if (!event) return;
    // Every packet of one press (updates, the repeated end) carries the press's timestamp.
    const ts = packet.header.timestamp;
    if (ts === this.lastEventTimestamp) return;
    const digit = dtmfDigit(event.event);
    if (digit === null) return;
    this.lastEventTimestamp = ts;
    for (const l of this.digitListeners) l(digit);
  }

  /** Each key the far end presses (RFC 4733 events), once per press. */
  onDigit(listener: (digit: string) => void): void {
    this.digitListeners.push(listener);
  }

  /** Whether the far end takes RFC 4733 digits (its answer listed telephone-event). */
  get acceptsDigits(): boolean {
    return this.peer.dtmfPayloadType !== undefined;
  }

  /**
   * Presses keys on the line (0-9 * # A-D): RFC 4733 events, one after the other; resolves
   * once the last is sent. An Error when the call is over, the far end takes no
   * telephone-event or a character is not a key.
   */
  sendDigits(digits: string): Promise<void> {
    const pt = this.peer.dtmfPayloadType;
    if (this.over) return Promise.reject(new Error('the call is over'));
    if (pt === undefined) return Promise.reject(new Error('the far end did not accept telephone-event (RFC 4733) digits'));
    if (!DTMF_DIGITS.test(digits)) return Promise.reject(new Error('digits must be 1-64 of 0-9 * # A-D'));
    const run = this.digitQueue.then(async () => {
      for (const digit of digits.toUpperCase()) {
        if (this.over) return;
        await this.sendEvent(pt, digit);
        await new Promise((r) => setTimeout(r, 80));
      }
    });
    this.digitQueue = run.catch(() => undefined);
    return run;
  }

  private async sendEvent(pt: number, digit: string): Promise<void> {
    this.sendingDigits = true;
    const start = this.timestamp >>> 0;
    const packets = telephoneEventPackets(digit);
    try {
      for (const [i, e] of packets.entries()) {
        if (this.over) return;
        this.sequence = (this.sequence + 1) & 0xffff;
        // The first packet of the event has the marker (RFC 4733 §2.5.1.3); all carry the event's start timestamp.
        const header = new RtpHeader({ payloadType: pt, sequenceNumber: this.sequence, timestamp: start, ssrc: this.ssrc, marker: i === 0 });
        this.socket.send(new RtpPacket(header, encodeTelephoneEvent(e)).serialize(), this.peer.port, this.peer.address);
        this.stats.sent++;
        // Updates every 20 ms; the three copies of the end go back to back.
        if (!e.end) await new Promise((r) => setTimeout(r, FRAME_MS));
      }
    } finally {
      // Audio resumes after the event's media time.
      this.timestamp = (start + packets[packets.length - 1].duration) >>> 0;
      this.silenceDue = Date.now();
      this.sendingDigits = false;
    }
  }

  protected sendFrame(frame: Int16Array, marker: boolean, _rtpTimestamp: number, dueAt: number): void {
    // Our own timestamp runs on without gaps: the silence between turns is sent too, from where the agent's audio ends.
    this.send(frame, marker);
    this.silenceDue = dueAt + FRAME_MS;
  }

  private send(frame: Int16Array, marker: boolean): void {
    if (this.over || this.sendingDigits) return;
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
    if (this.playing || this.sendingDigits) return;
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

  /** The call is over on our side for `reason` (a transfer done): the leg ends, and close() sends the BYE. */
  finish(reason: string): void {
    this.end(reason);
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
