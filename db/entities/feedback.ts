import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAtMs, p, updatedAt } from './common';

/** A visitor's thumb on an agent reply (`replyId` set, `rating`), or their 1-to-5 rating of the conversation (`score`). */
export const WidgetFeedback = defineEntity({
  name: 'WidgetFeedback',
  tableName: 'widget_feedback',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    siteId: p.text(),
    agentId: p.text().nullable(),
    conversationId: p.text(),
    replyId: p.text().nullable(),
    rating: p.enum(['up', 'down'] as const).columnType('text').nullable(),
    score: p.integer().nullable(),
    comment: p.text().nullable(),
    createdAt: createdAtMs(),
    updatedAt: updatedAt(),
  },
});
export type IWidgetFeedback = InferEntity<typeof WidgetFeedback>;
