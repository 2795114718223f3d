import { Migration } from '@mikro-orm/migrations';

/**
 * Analytics count a workspace's transcript messages in a time window: an index on
 * (workspace_id, created_at, role) keeps that an index-only range scan at millions of
 * rows. Conversations already have (workspace_id, created_at desc, id desc).
 */
export class Migration20261125170000AnalyticsIndexes extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index chat_messages_ws_time_idx on chat_messages (workspace_id, created_at, role)`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists chat_messages_ws_time_idx');
  }
}
