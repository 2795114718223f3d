import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, p, updatedAt } from './common';

/** A remote MCP tool server a workspace registered, and what its last check found. */
export const McpServer = defineEntity({
  name: 'McpServer',
  tableName: 'mcp_servers',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    name: p.text(),
    url: p.text(),
    credentialId: p.text().nullable(),
    enabled: p.boolean().default(true),
    status: p.enum(['ok', 'error', 'disabled'] as const).columnType('text'),
    tools: p.json<Array<{ name: string; description: string; input_schema: Record<string, unknown>; read_only?: boolean }>>().default([]),
    lastError: p.text().nullable(),
    checkedAt: p.datetime().nullable(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
});
export type IMcpServer = InferEntity<typeof McpServer>;
