import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, createdAtMs, p, updatedAt } from './common';

export type MessageKind = 'text' | 'template' | 'image' | 'audio' | 'video' | 'document' | 'location';
export type MessageStatus = 'sending' | 'sent' | 'delivered' | 'read' | 'failed' | 'received';
export interface StatusChange {
  status: string;
  at: string;
  error?: string;
}

export const Message = defineEntity({
  name: 'Message',
  tableName: 'messages',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    conversationId: p.text().nullable(),
    customerId: p.text().nullable(),
    agentId: p.text().nullable(),
    direction: p.enum(['outbound', 'inbound'] as const).columnType('text'),
    /** 'api': sent through POST /api/v1/messages (the only ones GET /api/v1/messages lists). */
    source: p.enum(['api', 'agent', 'customer'] as const).columnType('text'),
    channel: p.enum(['msgapp'] as const).columnType('text'),
    fromNumber: p.text(),
    toNumber: p.text(),
    kind: p.enum(['text', 'template', 'image', 'audio', 'video', 'document', 'location'] as const).columnType('text'),
    text: p.text().nullable(),
    templateName: p.text().nullable(),
    content: p.json<Record<string, unknown>>(),
    status: p.enum(['sending', 'sent', 'delivered', 'read', 'failed', 'received'] as const).columnType('text'),
    /** Newest first. */
    statusHistory: p.json<StatusChange[]>().defaultRaw(`'[]'`),
    error: p.text().nullable(),
    providerMessageId: p.text().nullable(),
    createdAt: createdAtMs(),
    updatedAt: updatedAt(),
  },
});
export type IMessage = InferEntity<typeof Message>;

/** One row per billable message. */
export const UsageRecord = defineEntity({
  name: 'UsageRecord',
  tableName: 'usage_records',
  properties: {
    id: p.bigint('string').primary().autoincrement(),
    workspaceId: p.text(),
    kind: p.text(),
    messageId: p.text().nullable().unique('usage_records_message_id_key'),
    /** A structured extraction's usage (domain/billing/usage-records.ts UsageRecordRepository.recordExtractionUsage). */
    extractionId: p.text().nullable().unique('usage_records_extraction_id_key'),
    /** Anything else counted once (an agent reply's tokens: `reply:<id>`). */
    reference: p.text().nullable().unique('usage_records_reference_key'),
    quantity: p.integer().default(1),
    createdAt: createdAt(),
  },
});
export type IUsageRecord = InferEntity<typeof UsageRecord>;

/**
 * An inbound msgapp message as the webhook received it (normalised), once per provider
 * message id: the input of its `msgapp-inbound:<provider message id>` workflow.
 */
export const MsgappInboundEvent = defineEntity({
  name: 'MsgappInboundEvent',
  tableName: 'msgapp_inbound_events',
  properties: {
    providerMessageId: p.text().primary(),
    workspaceId: p.text(),
    agentId: p.text(),
    message: p.json<Record<string, unknown>>(),
    receivedAt: createdAt(),
    /** The workflow was started (the outbox relay's mark). */
    dispatchedAt: p.datetime().nullable(),
    /** The message row the workflow recorded. */
    recordedMessageId: p.text().nullable(),
  },
});
export type IMsgappInboundEvent = InferEntity<typeof MsgappInboundEvent>;
