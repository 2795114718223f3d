import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAtMs, p } from './common';

export const ACTOR_TYPES = ['user', 'key', 'cli', 'anonymous', 'system'] as const;
export type ActorType = (typeof ACTOR_TYPES)[number];

/** One security-relevant act; append-only in the database (a trigger refuses UPDATE, DELETE and TRUNCATE). domain/audit owns it. */
export const AuditEvent = defineEntity({
  name: 'AuditEvent',
  tableName: 'audit_events',
  properties: {
    id: p.text().primary(),
    /** Null only for acts tied to no workspace (a failed sign-in with an unknown email). */
    workspaceId: p.text().nullable(),
    createdAt: createdAtMs(),
    action: p.text(),
    actorType: p.enum([...ACTOR_TYPES]).columnType('text'),
    actorId: p.text().nullable(),
    actorEmail: p.text().nullable(),
    ip: p.text().nullable(),
    userAgent: p.text().nullable(),
    targetType: p.text().nullable(),
    targetId: p.text().nullable(),
    details: p.json<Record<string, unknown>>().defaultRaw(`'{}'`),
  },
});
export type IAuditEvent = InferEntity<typeof AuditEvent>;
