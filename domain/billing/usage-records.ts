import type { EntityManager } from '@mikro-orm/postgresql';
import { UsageRecord } from '../../db/entities';

/**
 * Usage records: one row per billable event. This repository alone writes
 * `usage_records` (CreditService reads them); each method runs on the EntityManager it is
 * given.
 */
export class UsageRecordRepository {
  /**
   * A sent message counts once, however often its send step runs (unique on the message).
   */
  async recordMessageUsage(em: EntityManager, u: { workspaceId: string; messageId: string }): Promise<void> {
    await em.createQueryBuilder(UsageRecord).insert({ workspaceId: u.workspaceId, kind: 'msgapp_message', messageId: u.messageId }).onConflict(['messageId']).ignore();
  }

  /**
   * A structured extraction that succeeded counts once, however often its last step runs
   * (unique on the extraction): quantity is its pages (1 for a document without pages: a
   * text file, a DOCX). Its tokens stay on the extraction's own row.
   */
  async recordExtractionUsage(em: EntityManager, u: { workspaceId: string; extractionId: string; pages: number | null }): Promise<void> {
    await em
      .createQueryBuilder(UsageRecord)
      .insert({ workspaceId: u.workspaceId, kind: 'structured_extraction', extractionId: u.extractionId, quantity: Math.max(1, u.pages ?? 1) })
      .onConflict(['extractionId'])
      .ignore();
  }

  /**
   * An agent reply's language-model tokens (prompt and completion, every round of the turn), counted once per reply,
   * under `llm_tokens` (the installation's default model) or `llm_tokens:<model>` (another allowed model, priced on its own).
   */
  async recordTokenUsage(em: EntityManager, u: { workspaceId: string; replyId: string; tokens: number; kind?: string }): Promise<void> {
    if (!(u.tokens > 0)) return;
    await em.createQueryBuilder(UsageRecord).insert({ workspaceId: u.workspaceId, kind: u.kind ?? 'llm_tokens', reference: `reply:${u.replyId}`, quantity: Math.round(u.tokens) }).onConflict(['reference']).ignore();
  }
}
