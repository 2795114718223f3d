import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAtMs, p, updatedAt } from './common';

export const Conversation = defineEntity({
  name: 'Conversation',
  tableName: 'conversations',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    customerId: p.text().nullable(),
    agentId: p.text().nullable(),
    channel: p.enum(['msgapp', 'web', 'voice'] as const).columnType('text'),
    status: p.enum(['open', 'closed'] as const).columnType('text'),
    needsHuman: p.boolean().default(false),
    caseReason: p.text().nullable(),
    lastInboundAt: p.datetime().nullable(),
    createdAt: createdAtMs().defaultRaw('now()'),
    updatedAt: updatedAt(),
    siteId: p.text().nullable(),
    title: p.text().nullable(),
    closedAt: p.datetime().nullable(),
    /** The verified visitor who started a web conversation: only their user_hash reaches it. */
    verifiedExternalId: p.text().nullable(),
    /** The person who holds it in the inbox (one at most: taken by a conditional update); null: the queue's, or nobody's. */
    assigneeId: p.text().nullable(),
    /** Since when it waits for a person (needs_human and unassigned): the queue's order and the wait time's start. */
    queuedAt: p.datetime().nullable(),
    /** Since when its assignee holds it: the handle time's start. */
    assignedAt: p.datetime().nullable(),
    /** Why a person closed it from the inbox. */
    closeReason: p.text().nullable(),
    /** A console test conversation ("Try it"): kept out of the inbox, the lists, analytics and billing. */
    isTest: p.boolean().default(false),
  },
});
export type IConversation = InferEntity<typeof Conversation>;

/** A conversation's timeline. */
export const ConversationEvent = defineEntity({
  name: 'ConversationEvent',
  tableName: 'conversation_events',
  properties: {
    id: p.text().primary(),
    conversationId: p.text(),
    type: p.text(),
    data: p.json<Record<string, unknown>>().defaultRaw(`'{}'`),
    createdAt: createdAtMs(),
  },
});
export type IConversationEvent = InferEntity<typeof ConversationEvent>;

/** The web-chat transcript. */
export const ChatMessage = defineEntity({
  name: 'ChatMessage',
  tableName: 'chat_messages',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    conversationId: p.text(),
    role: p.enum(['user', 'assistant', 'human', 'tool'] as const).columnType('text'),
    clientMessageId: p.text().nullable(),
    replyTo: p.text().nullable(),
    text: p.text().defaultRaw(`''`),
    attachments: p.json<unknown[]>().defaultRaw(`'[]'`),
    extras: p.json<Record<string, unknown>>().defaultRaw(`'{}'`),
    unsolicited: p.boolean().default(false),
    createdAt: createdAtMs(),
  },
});
export type IChatMessage = InferEntity<typeof ChatMessage>;

/** The background tasks of a conversation's actor. */
export const ConversationTask = defineEntity({
  name: 'ConversationTask',
  tableName: 'conversation_tasks',
  properties: {
    conversationId: p.text().primary(),
    taskKey: p.text().primary(),
    workspaceId: p.text(),
    kind: p.text(),
    label: p.text(),
    status: p.enum(['running', 'completed', 'cancelled', 'failed'] as const).columnType('text'),
    blocking: p.boolean().default(false),
    workflowId: p.text(),
    error: p.text().nullable(),
    startedAt: createdAtMs(),
    finishedAt: p.datetime(3).nullable(),
  },
});
export type IConversationTask = InferEntity<typeof ConversationTask>;
