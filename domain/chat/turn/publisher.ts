import type { EntityManager } from '@mikro-orm/postgresql';
import { ChatFrames } from '../frames';
import { replyFrame, type ChatMessageRow } from '../transcript';

/**
 * The frames an agent turn sends to its conversation's sockets (the port; the turn never
 * builds a frame). Wired in the composition root: ChatFramePublisher, NOTIFY on the chat
 * channel as every other producer of frames.
 */
export interface TurnPublisher {
  /**
   * The next piece of the streamed reply. `reset` on the first delta of an attempt after the first: the attempt
   * before may have streamed part of an answer, which the widget drops instead of gluing this one to it.
   */
  replyDelta(conversationId: string, replyId: string, text: string, reset: boolean): Promise<void>;
  /** The stored reply, whole (a retried turn announces it again). */
  reply(conversationId: string, row: ChatMessageRow): Promise<void>;
  /** The reply's follow-up chips, as their own frame after it. */
  suggestedActions(conversationId: string, replyId: string, chips: string[]): Promise<void>;
  /** A person holds the conversation now; with `replyId`, that visitor message's turn ended unanswered (the widget stops waiting). */
  handoff(conversationId: string, replyId?: string): Promise<void>;
  /** A page command for the page's own code, sent while the reply is written. */
  pageCommand(conversationId: string, command: string, args: Record<string, unknown>): Promise<void>;
}

/** The publisher of the API and the worker: PostgreSQL NOTIFY on `chat_frames` (frames.ts), which every API process forwards. */
export class ChatFramePublisher implements TurnPublisher {
  private readonly frames: ChatFrames;

  constructor(em: EntityManager) {
    this.frames = new ChatFrames(em);
  }

  replyDelta(conversationId: string, replyId: string, text: string, reset: boolean): Promise<void> {
    return this.frames.publish(conversationId, { type: 'reply_delta', reply_id: replyId, text, ...(reset ? { reset: true as const } : {}) });
  }

  reply(conversationId: string, row: ChatMessageRow): Promise<void> {
    // Too large for a notification: sent as a reference to the stored row.
    return this.frames.publish(conversationId, replyFrame(row), row.id);
  }

  suggestedActions(conversationId: string, replyId: string, chips: string[]): Promise<void> {
    return this.frames.publish(conversationId, { type: 'suggested_actions', reply_id: replyId, suggested_actions: chips });
  }

  handoff(conversationId: string, replyId?: string): Promise<void> {
    return this.frames.publish(conversationId, replyId === undefined ? { type: 'handoff', active: true } : { type: 'handoff', active: true, reply_id: replyId });
  }

  pageCommand(conversationId: string, command: string, args: Record<string, unknown>): Promise<void> {
    return this.frames.publish(conversationId, { type: 'ui:command', command, args });
  }
}
