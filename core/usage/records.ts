import type { EntityManager } from '@mikro-orm/postgresql';
import { UsageRecord } from '../db/entities';

/**
 * Usage records: one row per billable event. This module alone writes `usage_records`.
 * A sent message counts once, however often its send step runs (unique on the message).
 */
export async function recordMessageUsage(em: EntityManager, u: { workspaceId: string; messageId: string }): Promise<void> {
  await em.createQueryBuilder(UsageRecord).insert({ workspaceId: u.workspaceId, kind: 'msgapp_message', messageId: u.messageId }).onConflict(['messageId']).ignore();
}
