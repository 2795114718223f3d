import { Migration } from '@mikro-orm/migrations';

/**
 * Metrics (issue 28 item 5): the backlog gauges are read at every scrape (app/metrics-backlog.ts).
 * Partial indexes over the rows not yet settled keep those reads as small as the backlog:
 * unsettled webhook deliveries (count by outbox/retrying, oldest first) and knowledge-base
 * files waiting for or under indexing.
 */
export class Migration20261128160000MetricsIndexes extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index webhook_deliveries_pending_idx on webhook_deliveries (created_at) where status = 'pending'`);
    this.addSql(`create index kb_files_indexing_idx on kb_files (created_at) where status in ('pending', 'processing')`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists webhook_deliveries_pending_idx');
    this.addSql('drop index if exists kb_files_indexing_idx');
  }
}
