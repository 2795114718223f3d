import type { Logger } from 'pino';
import type { PgNotifications, Subscription } from '../../db/notifications';
import { CHAT_CHANNEL, type ChatNotice } from '../chat/frames';

/** One voice turn's reply as it streams (see ReplyDeltas.listen). */
export interface ReplyStream {
  /**
   * Stops hearing the deltas and hands `onDelta` what the stored reply has beyond what was
   * forwarded, so the chunks concatenate to `reply` (nothing when they no longer can: a
   * retried turn replaced a part already forwarded); `reply`, to resolve the turn with.
   */
  finish(reply: string): string;
  /** Stops hearing the deltas (the turn failed or was held). */
  stop(): void;
}

interface Listener {
  onDelta: (chunk: string) => void;
  /** What was forwarded so far. */
  sent: string;
  /** No more forwarding: a reset after something was forwarded, or notices lost. */
  cut: boolean;
}

/**
 * The model's reply for a voice turn while it is written: the turn's `reply_delta` frames,
 * which the turn's activity (on any worker) publishes on the chat channel (PostgreSQL
 * NOTIFY, domain/chat/frames.ts) as it does for the widget's sockets. One LISTEN per
 * worker, started by the first turn and kept; each turn registers its reply id before
 * the visitor message is sent and unregisters when its turn returns. A notice is only
 * parsed while some turn listens.
 */
export class ReplyDeltas {
  private readonly listeners = new Map<string, Listener>();
  private sub: Subscription | null = null;
  private starting: Promise<void> | null = null;

  constructor(
    private readonly notifications: PgNotifications,
    private readonly log: Pick<Logger, 'warn'>,
  ) {}

  /** Hears reply `replyId`'s deltas from now on (resolves once the LISTEN is in place). */
  async listen(replyId: string, onDelta: (chunk: string) => void): Promise<ReplyStream> {
    const listener: Listener = { onDelta, sent: '', cut: false };
    this.listeners.set(replyId, listener);
    try {
      await this.start();
    } catch (err) {
      // The whole reply still comes back with the turn: spoken at its end, as without a producer that streams.
      this.log.warn({ err }, 'voice turn: the reply is not streamed (the chat channel could not be heard)');
      listener.cut = true;
    }
    const stop = () => {
      if (this.listeners.get(replyId) === listener) this.listeners.delete(replyId);
    };
    return {
      stop,
      finish: (reply) => {
        stop();
        if (!listener.sent) return reply;
        // The stored reply may differ from the streamed text by its surrounding white space only.
        const sent = listener.sent.trimStart();
        const whole = reply.trimStart();
        if (whole.startsWith(sent) && whole.length > sent.length) listener.onDelta(whole.slice(sent.length));
        else if (!whole.startsWith(sent)) this.log.warn({ replyId }, 'voice turn: the stored reply differs from what was streamed; its rest is not spoken');
        return reply;
      },
    };
  }

  private start(): Promise<void> {
    this.sub ??= this.notifications.subscribe(
      [CHAT_CHANNEL],
      {
        onNotify: (_channel, payload) => this.onNotice(payload),
        // Deltas may be missed from here on: each turn listening keeps what it has and takes the rest from the stored reply.
        onLost: () => {
          for (const l of this.listeners.values()) l.cut = true;
        },
      },
      'voice reply deltas',
    );
    this.starting ??= this.sub.start().catch((err: unknown) => {
      this.starting = null;
      throw err;
    });
    return this.starting;
  }

  private onNotice(payload: string): void {
    // Most notices are other conversations' frames: only a reply_delta is parsed, and only while a turn listens.
    if (this.listeners.size === 0 || !payload.includes('"reply_delta"')) return;
    let notice: ChatNotice;
    try {
      notice = JSON.parse(payload) as ChatNotice;
    } catch {
      return;
    }
    if (notice.k !== 'frame' || notice.f.type !== 'reply_delta') return;
    const l = this.listeners.get(notice.f.reply_id);
    if (!l || l.cut) return;
    // A retried turn starts its reply over: what was forwarded cannot be taken back, so nothing more is.
    if (notice.f.reset && l.sent) {
      l.cut = true;
      return;
    }
    l.sent += notice.f.text;
    l.onDelta(notice.f.text);
  }
}
