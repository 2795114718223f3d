import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import type { SecretBox } from '../lib/crypto/secret-box';
import type { PgNotifications } from '../db/notifications';
import { ApiError } from './http-errors';
import { verifyRoomToken } from '../lib/crypto/room-tokens';
import { VOICE_SIGNALS, type VoiceSessionService } from '../domain/voice/sessions';

const CLOSE_POLICY_VIOLATION = 1008;
const CLOSE_NORMAL = 1000;
/** The first frame (join) must come this soon after the upgrade. */
const JOIN_WITHIN_MS = 10_000;
/** How long the browser's offer waits for the agent's answer. */
const ANSWER_WITHIN_MS = 30_000;

/**
 * A browser's audio offer with a data channel and every candidate gathered is 2–6 KB;
 * 16 KB leaves room for many interfaces while keeping what one socket can make us
 * store and relay small (the socket's frames are capped at 64 KB by the app).
 */
export const MAX_OFFER_BYTES = 16_384;
/** Offers one socket may send: the first, and a renegotiation or two (an ICE restart); the rest is abuse. */
export const MAX_OFFERS_PER_SOCKET = 3;
/** Default VOICE_SIGNAL_MAX_SOCKETS_PER_ADDRESS: a visitor needs one per session; an office NAT a few visitors. */
export const DEFAULT_SIGNAL_SOCKETS_PER_ADDRESS = 20;

const ClientFrame = z.discriminatedUnion('type', [
  z.object({ type: z.literal('join'), token: z.string().min(1).max(300) }),
  z.object({ type: z.literal('offer'), sdp: z.string().min(1).max(MAX_OFFER_BYTES) }),
  z.object({ type: z.literal('bye') }),
]);

/** What holds a socket slot: the TCP connection of the handshake (its `close` frees the slot). */
interface Connection {
  destroyed: boolean;
  once(event: 'close', listener: () => void): unknown;
}

/**
 * The direct transport's signalling socket (`rtc_url`, `/api/voice/rtc`). Protocol (also
 * in docs/voice.md): the browser sends `{type: join, token}` (the rtc_token, never in the
 * URL), gets `{type: joined, room, ice_servers}`; sends `{type: offer, sdp}` (all ICE
 * candidates gathered), gets `{type: answer, sdp}` from the agent's peer, wherever the
 * worker runs (the offer and answer meet in the session's row; NOTIFY wakes each side);
 * `{type: ended, reason}` when the session is over; errors are `{type: error, error,
 * message}` and close the socket.
 *
 * Limits: sockets per client address (counted at the handshake, before the upgrade, as
 * the chat hub counts its own); the rtc_token is single-use (the first socket to join
 * claims the room in its row, so across API processes; a later socket with the same
 * token is refused and leaves the live session alone); at most MAX_OFFERS_PER_SOCKET
 * offers of at most MAX_OFFER_BYTES each.
 */
export class VoiceSignalling {
  private readonly waiting = new Map<string, () => void>();
  private readonly slotsByAddress = new Map<string, number>();
  private readonly maxPerAddress: number;

  constructor(
    private readonly o: {
      sessions: VoiceSessionService;
      box: SecretBox;
      notifications: PgNotifications | null;
      log: Logger;
      iceServers: Array<{ urls: string }>;
      /** VOICE_SIGNAL_MAX_SOCKETS_PER_ADDRESS. */
      maxSocketsPerAddress?: number;
    },
  ) {
    this.maxPerAddress = o.maxSocketsPerAddress ?? DEFAULT_SIGNAL_SOCKETS_PER_ADDRESS;
  }

  /**
   * Takes a socket slot for a handshake from `address`, before the upgrade and any lookup,
   * or answers 429 `rate_limited` (counted in this process, where the sockets are). The slot
   * is freed when the handshake's TCP connection closes, whatever happened to it.
   */
  reserve(address: string, connection: Connection): void {
    const held = this.slotsByAddress.get(address) ?? 0;
    if (held >= this.maxPerAddress) {
      // An idle socket is closed JOIN_WITHIN_MS after its upgrade: a slot may be free by then.
      throw new ApiError(429, 'rate_limited', `Too many voice signalling sockets open from this address (at most ${this.maxPerAddress}); close one first`, {}, { 'Retry-After': String(JOIN_WITHIN_MS / 1000) });
    }
    this.slotsByAddress.set(address, held + 1);
    let holding = true;
    const release = () => {
      if (!holding) return;
      holding = false;
      const n = (this.slotsByAddress.get(address) ?? 1) - 1;
      if (n > 0) this.slotsByAddress.set(address, n);
      else this.slotsByAddress.delete(address);
    };
    connection.once('close', release);
    // Closed before the listener was added: its close event is already gone.
    if (connection.destroyed) release();
  }

  async start(): Promise<void> {
    const sub = this.o.notifications?.subscribe([VOICE_SIGNALS], { onNotify: (_c, payload) => payload.startsWith('answer:') && this.waiting.get(payload.slice(7))?.() }, 'voice signalling');
    await sub?.start();
    this.stop = async () => {
      await sub?.stop();
    };
  }

  stop: () => Promise<void> = async () => undefined;

  attach(ws: WebSocket): void {
    let room: string | null = null;
    let offers = 0;
    const send = (frame: object) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(frame));
    const fail = (error: string, message: string) => {
      send({ type: 'error', error, message });
      ws.close(CLOSE_POLICY_VIOLATION, error);
    };
    const joinTimer = setTimeout(() => !room && fail('join_timeout', 'Send {type: "join", token} first'), JOIN_WITHIN_MS);
    // The browser hanging up (bye, or its socket gone: a closed tab) ends the session: a
    // closed RTCPeerConnection is not reliably noticed by the agent's peer.
    ws.on('close', () => {
      clearTimeout(joinTimer);
      if (room) void this.o.sessions.control(room, { k: 'end', reason: 'visitor_left' }).catch(() => undefined);
    });
    ws.on('message', (data: Buffer | ArrayBuffer | Buffer[]) => {
      // Measured before parsing: an oversized offer costs no JSON work.
      const bytes = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data instanceof ArrayBuffer ? data.byteLength : data.length;
      if (bytes > MAX_OFFER_BYTES + 1024) return fail('frame_too_large', `An offer's SDP is at most ${MAX_OFFER_BYTES} bytes`);
      let frame: z.infer<typeof ClientFrame>;
      try {
        frame = ClientFrame.parse(JSON.parse(String(data)));
      } catch {
        return fail('invalid_frame', `Frames are JSON: {type: join|offer|bye, ...}; an offer's sdp is at most ${MAX_OFFER_BYTES} characters`);
      }
      if (frame.type === 'offer' && ++offers > MAX_OFFERS_PER_SOCKET) return fail('too_many_offers', `At most ${MAX_OFFERS_PER_SOCKET} offers per socket; start the voice session again`);
      void this.handle(frame, room, (r) => (room = r), send, fail, ws).catch((err) => {
        this.o.log.warn({ err }, 'voice signalling failed');
        fail('internal_error', 'Signalling failed; start the voice session again');
      });
    });
  }

  private async handle(
    frame: z.infer<typeof ClientFrame>,
    room: string | null,
    setRoom: (r: string) => void,
    send: (f: object) => void,
    fail: (e: string, m: string) => void,
    ws: WebSocket,
  ): Promise<void> {
    if (frame.type === 'join') {
      if (room) return fail('invalid_frame', 'Already joined');
      const grant = verifyRoomToken(this.o.box, frame.token);
      if (!grant) return fail('invalid_token', 'The rtc_token is invalid or expired; start the voice session again');
      const row = await this.o.sessions.sessionById(grant.room);
      if (!row || row.status === 'ended' || row.status === 'failed') return fail('session_ended', 'This voice session has ended');
      // Single-use: only the first socket speaks for the room. A later one is refused before it
      // is bound to the room, so its closing never ends the visitor's session.
      if (!(await this.o.sessions.claimRoom(grant.room))) return fail('token_used', 'This rtc_token was already used by another socket; start the voice session again');
      setRoom(grant.room);
      send({ type: 'joined', room: grant.room, ice_servers: this.o.iceServers });
      return;
    }
    if (!room) return fail('not_joined', 'Send {type: "join", token} first');
    if (frame.type === 'bye') {
      ws.close(CLOSE_NORMAL, 'bye');
      return;
    }
    if (!(await this.o.sessions.putOffer(room, frame.sdp))) return fail('session_ended', 'This voice session has ended');
    const answer = await this.awaitAnswer(room);
    if (!answer) return fail('agent_unavailable', 'The agent did not answer in time; start the voice session again');
    send({ type: 'answer', sdp: answer });
  }

  /** The agent's answer: woken by NOTIFY, read from the row (also polled each second, in case a notice was missed). */
  private async awaitAnswer(room: string): Promise<string | null> {
    const deadline = Date.now() + ANSWER_WITHIN_MS;
    try {
      while (Date.now() < deadline) {
        const a = await this.o.sessions.answer(room);
        if (a?.sdp) return a.sdp;
        if (!a || a.status === 'ended' || a.status === 'failed') return null;
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, 1000);
          this.waiting.set(room, () => {
            clearTimeout(t);
            resolve();
          });
        });
      }
      return null;
    } finally {
      this.waiting.delete(room);
    }
  }
}
