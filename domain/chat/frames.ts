import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Frames pushed to a conversation's widget sockets. Whoever produces one (an activity
 * in a worker, an API route) publishes it through PostgreSQL NOTIFY on `chat_frames`;
 * every API process LISTENs and forwards it to the sockets it holds for that
 * conversation. A frame too large for a notification (8000 bytes) travels as a
 * reference to its persisted chat message instead.
 */
export type ChatFrame =
  /**
   * The next piece of a streamed reply. `reset` on the first delta of a turn run again (its first attempt was cut
   * off mid-stream, its worker lost): the live bubble starts over with this text instead of appending to the
   * partial answer. The final `reply` replaces the bubble either way.
   */
  | { type: 'reply_delta'; reply_id: string; text: string; reset?: true }
  | {
      type: 'reply';
      reply_id: string;
      text: string;
      attachments?: unknown[];
      charts?: unknown[];
      cards?: unknown[];
      rich?: unknown[];
      suggested_actions?: string[];
      citations?: Array<{ file_id: string; title: string; url?: string }>;
      author?: 'human';
      author_name?: string;
      author_avatar_url?: string;
      unsolicited?: true;
    }
  /** A visitor message the actor took, for the conversation's other sockets (transcript.announceVisitorMessage). */
  | { type: 'visitor_message'; message_id: string; client_message_id: string; reply_id: string; text: string; timestamp: string; attachments?: unknown[] }
  /**
   * Whether a person holds the conversation (`needs_human`): sent when that changes. With `reply_id`, the turn of that
   * visitor message ended without an answer because a person holds it: the client stops waiting for that reply.
   */
  | { type: 'handoff'; active: boolean; reply_id?: string }
  | { type: 'suggested_actions'; reply_id: string; suggested_actions: string[] }
  | { type: 'error'; reply_id: string; code: 'workflow_provisioning' | 'workflow_execution_failed'; text: string }
  | { type: 'task_status'; task_key: string; label: string; status: 'running' | 'completed' | 'cancelled' | 'failed' }
  | { type: 'ui:command'; command: string; args: Record<string, unknown> }
  | { type: 'ping' };

export const CHAT_CHANNEL = 'chat_frames';

/** What travels on the channel. */
export type ChatNotice =
  /** A frame for the sockets of one conversation. */
  | { k: 'frame'; c: string; f: ChatFrame }
  /** A reply too large to carry: the listener loads chat message `m` and sends it as a `reply` frame. */
  | { k: 'ref'; c: string; m: string }
  /** Authorization may have changed (site suspended or edited, conversation closed): re-check these sockets. */
  | { k: 'recheck'; site?: string; c?: string };

/**
 * The console inbox's channel, beside the sockets' (the same LISTEN connection and the same kind of hub,
 * api/inbox-hub.ts; apart so the widget's sockets never parse the team's traffic): a conversation of workspace `w`
 * changed (`e`: new, activity, handoff, assignment, status; `h`: it waits for a person). Sent by the `conversations`
 * table's trigger (migration Inbox) at the writer's commit.
 */
export const INBOX_CHANNEL = 'inbox_changes';
export type InboxChange = 'new' | 'activity' | 'handoff' | 'assignment' | 'status';
export interface InboxNotice {
  k: 'inbox';
  w: string;
  c: string;
  e: InboxChange;
  h: boolean;
}

const MAX_PAYLOAD = 7900;

/**
 * The one way to publish on the chat channel: frames for a conversation's sockets and
 * re-check requests, whoever produces them (the turn's ChatFramePublisher, the transcript,
 * conversations, sites, widget sessions, the conversation actor's activities). Holds only
 * the EntityManager whose connection sends the NOTIFY: a frame is sent now, not at a
 * transaction's commit.
 */
export class ChatFrames {
  constructor(private readonly em: EntityManager) {}

  /** Publishes one frame to every socket of the conversation, wherever it is held. */
  async publish(conversationId: string, frame: ChatFrame, messageId?: string): Promise<void> {
    const notice: ChatNotice = { k: 'frame', c: conversationId, f: frame };
    if (Buffer.byteLength(JSON.stringify(notice)) <= MAX_PAYLOAD) return this.notify(notice);
    if (frame.type === 'reply' && messageId) return this.notify({ k: 'ref', c: conversationId, m: messageId });
    if (frame.type === 'reply_delta') {
      // Split a (rare) huge delta into pieces that fit.
      const step = 1500;
      for (let i = 0; i < frame.text.length; i += step) {
        // `reset` belongs to the first piece only: the later ones append to it.
        const piece = { type: frame.type, reply_id: frame.reply_id, text: frame.text.slice(i, i + step), ...(i === 0 && frame.reset ? { reset: true as const } : {}) };
        await this.notify({ k: 'frame', c: conversationId, f: piece });
      }
      return;
    }
    throw new Error(`chat frame ${frame.type} is too large to publish`);
  }

  /** Asks every API process to re-check the authorization of the matching sockets now. */
  async recheck(target: { site?: string; conversation?: string }): Promise<void> {
    await this.notify({ k: 'recheck', site: target.site, c: target.conversation });
  }

  private async notify(notice: ChatNotice): Promise<void> {
    // raw SQL: pg_notify has no ORM form (on the connection: a frame is sent now, not at a transaction's commit).
    // eslint-disable-next-line no-restricted-syntax
    await this.em.getConnection().execute(`select pg_notify(?, ?)`, [CHAT_CHANNEL, JSON.stringify(notice)]);
  }
}
