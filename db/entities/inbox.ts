import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAtMs, p, updatedAt } from './common';

/** A team member's note on a conversation (domain/inbox/notes.ts owns it): never in the widget's history or webhooks. */
export const ConversationNote = defineEntity({
  name: 'ConversationNote',
  tableName: 'conversation_notes',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    conversationId: p.text(),
    authorId: p.text().nullable(),
    authorEmail: p.text(),
    text: p.text(),
    createdAt: createdAtMs(),
  },
});
export type IConversationNote = InferEntity<typeof ConversationNote>;

/** A workspace's canned reply, with `{{customer.name}}`-style variables (domain/inbox/canned.ts). */
export const CannedReply = defineEntity({
  name: 'CannedReply',
  tableName: 'canned_replies',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    title: p.text(),
    text: p.text(),
    createdAt: createdAtMs(),
    updatedAt: updatedAt(),
  },
});
export type ICannedReply = InferEntity<typeof CannedReply>;

/** A person's presence in the inbox: the live stream's last heartbeat, away, how many conversations they hold at most. */
export const InboxAgent = defineEntity({
  name: 'InboxAgent',
  tableName: 'inbox_agents',
  properties: {
    userId: p.text().primary(),
    workspaceId: p.text(),
    lastSeenAt: p.datetime().nullable(),
    away: p.boolean().default(false),
    capacity: p.integer().default(3),
    lastAssignedAt: p.datetime().nullable(),
  },
});
export type IInboxAgent = InferEntity<typeof InboxAgent>;

/** A workspace's inbox settings (no row: automatic assignment off). */
export const InboxSettings = defineEntity({
  name: 'InboxSettings',
  tableName: 'inbox_settings',
  properties: {
    workspaceId: p.text().primary(),
    autoAssign: p.boolean().default(false),
    updatedAt: updatedAt(),
  },
});
export type IInboxSettings = InferEntity<typeof InboxSettings>;
