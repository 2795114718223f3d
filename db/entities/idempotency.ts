import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, p } from './common';

/** A claimed Idempotency-Key and, once completed, its sealed response. */
export const IdempotencyKey = defineEntity({
  name: 'IdempotencyKey',
  tableName: 'idempotency_keys',
  properties: {
    workspaceId: p.text().primary(),
    key: p.text().primary(),
    requestHash: p.text(),
    state: p.enum(['in_progress', 'completed'] as const).columnType('text'),
    responseStatus: p.integer().nullable(),
    responseBody: p.text().nullable(),
    responseContentType: p.text().nullable(),
    createdAt: createdAt(),
    expiresAt: p.datetime(),
  },
});
export type IIdempotencyKey = InferEntity<typeof IdempotencyKey>;
