import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { p } from './common';

/**
 * Transcript messages per workspace, UTC hour, channel and direction (`in`: the
 * customer's, `out`: the agent's and human agents'), kept by a trigger on chat_messages
 * (Migration20261125174000AnalyticsRollups): analytics read full hours here, summing the
 * key's shards.
 */
export const AnalyticsMessageHour = defineEntity({
  name: 'AnalyticsMessageHour',
  tableName: 'analytics_message_hours',
  properties: {
    workspaceId: p.text().primary(),
    hour: p.datetime().primary(),
    channel: p.text().primary(),
    direction: p.enum(['in', 'out'] as const).columnType('text').primary(),
    /** One of 16 rows per key, by the writing connection (Migration20261129120000AnalyticsShards): readers sum them. */
    shard: p.smallint().primary().default(0),
    messages: p.bigint('number').default(0),
  },
});
export type IAnalyticsMessageHour = InferEntity<typeof AnalyticsMessageHour>;

/**
 * One row per conversation, kept by triggers (Migration20261125174000AnalyticsRollups):
 * its workspace, channel and start, the customer's first message, the first reply after
 * it, whether the agent answered, whether it was handed over; people's assignments, wait
 * and handle times from the inbox's timeline entries (Migration20261128233000InboxTimes).
 */
export const AnalyticsConversation = defineEntity({
  name: 'AnalyticsConversation',
  tableName: 'analytics_conversations',
  properties: {
    conversationId: p.text().primary(),
    workspaceId: p.text(),
    channel: p.text(),
    createdAt: p.datetime(),
    firstInAt: p.datetime().nullable(),
    firstReplyAt: p.datetime().nullable(),
    answered: p.boolean().default(false),
    handedOff: p.boolean().default(false),
    humanAssignments: p.integer().default(0),
    humanWaitMs: p.bigint('number').default(0),
    humanHandleMs: p.bigint('number').default(0),
    /** Of the current stay in the queue, the time counted already (a re-queue keeps `queued_at`). */
    humanCountedMs: p.bigint('number').default(0),
    /** A person holds it now: its handle time is not final. */
    humanHeld: p.boolean().default(false),
  },
});
export type IAnalyticsConversation = InferEntity<typeof AnalyticsConversation>;

/** Conversations started per workspace and 15-minute UTC slot, kept by a trigger (time series in any zone). */
export const AnalyticsConversationSlot = defineEntity({
  name: 'AnalyticsConversationSlot',
  tableName: 'analytics_conversation_slots',
  properties: {
    workspaceId: p.text().primary(),
    slot: p.datetime().primary(),
    /** One of 16 rows per key, by the writing connection (Migration20261129120000AnalyticsShards): readers sum them. */
    shard: p.smallint().primary().default(0),
    conversations: p.bigint('number').default(0),
  },
});
export type IAnalyticsConversationSlot = InferEntity<typeof AnalyticsConversationSlot>;
