import { defineEntity, type InferEntity } from '@mikro-orm/core';
import type { AgentSpec } from '../../domain/agents/spec';
import { createdAtMs, p, updatedAt } from './common';

export const Agent = defineEntity({
  name: 'Agent',
  tableName: 'agents',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    name: p.text(),
    status: p.enum(['draft', 'published'] as const).columnType('text'),
    spec: p.json<AgentSpec>(),
    /** Why a published agent cannot run (empty when it can); what sender_agent_invalid reports. */
    invalidReasons: p.array().defaultRaw(`'{}'`),
    publishedAt: p.datetime().nullable(),
    createdAt: createdAtMs().defaultRaw('now()'),
    updatedAt: updatedAt(),
  },
});
export type IAgent = InferEntity<typeof Agent>;
