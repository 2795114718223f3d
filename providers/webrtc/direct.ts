import type { SecretBox } from '../../lib/crypto/secret-box';
import type { PgNotifications } from '../../db/notifications';
import type { DirectPeerOptions } from './direct-peer';
import { VOICE_SIGNALS, type CreateRoomInput, type MediaLeg, type VoiceRoom, type VoiceSignalling, type VoiceTransport } from '../../domain/ports/voice';
import { mintRoomToken } from '../../lib/crypto/room-tokens';

export interface DirectTransportOptions {
  box: SecretBox;
  sessions: VoiceSignalling;
  /** The process's LISTEN connection (the worker's, where the agent's peer lives). */
  notifications: PgNotifications | null;
  /** ws(s)://…/api/voice/rtc: the signalling socket the browser joins (PUBLIC_BASE_URL's origin). */
  signalUrl: string;
  peer?: DirectPeerOptions;
}

/**
 * The embedded transport: the voice agent is the browser's WebRTC peer (werift in the
 * worker's media activity), no media server between them. The browser signals through
 * the API's socket (`rtc_url`); the API and the worker meet in the session's row (offer,
 * answer) and wake each other with NOTIFY, so the socket and the peer may live on
 * different machines. Media then flows browser ↔ worker directly (ICE).
 */
export class DirectTransport implements VoiceTransport {
  readonly kind = 'direct' as const;

  constructor(private readonly opts: DirectTransportOptions) {}

  async createRoom(input: CreateRoomInput): Promise<VoiceRoom> {
    return { transport: 'direct', room_name: input.voiceSessionId, rtc_url: this.opts.signalUrl, rtc_token: mintRoomToken(this.opts.box, input.voiceSessionId, input.identity, input.ttlSeconds) };
  }

  /** Waits for the browser's offer (woken by NOTIFY, checked every second as well), answers it, and resolves once connected. */
  async joinAsAgent(room: string, signal: AbortSignal): Promise<MediaLeg> {
    let wake: () => void = () => undefined;
    const sub = this.opts.notifications?.subscribe([VOICE_SIGNALS], { onNotify: (_c, payload) => payload === `offer:${room}` && wake() }, `voice agent ${room}`);
    await sub?.start();
    try {
      let answered: string | null = null;
      for (;;) {
        if (signal.aborted) throw signal.reason ?? new Error('aborted');
        const offer = await this.opts.sessions.offer(room);
        if (offer && offer !== answered) {
          answered = offer;
          // werift (WebRTC, DTLS, SRTP: some 600 modules) loads with the first call, not with the app.
          const { DirectLeg } = await import('./direct-peer.js');
          const { answerSdp, leg, connected } = await DirectLeg.answer(offer, this.opts.peer);
          await this.opts.sessions.putAnswer(room, answerSdp);
          const aborted = new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason ?? new Error('aborted')), { once: true }));
          try {
            await Promise.race([connected, aborted]);
            return leg;
          } catch (err) {
            await leg.close();
            if (signal.aborted) throw err;
            continue; // the browser gave up on that offer: wait for a new one
          }
        }
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, 1000);
          wake = () => {
            clearTimeout(t);
            resolve();
          };
          signal.addEventListener('abort', () => wake(), { once: true });
        });
      }
    } finally {
      await sub?.stop();
    }
  }

  async deleteRoom(): Promise<void> {
    // Nothing outside the session's row and the agent's peer, which the media activity closes.
  }
}
