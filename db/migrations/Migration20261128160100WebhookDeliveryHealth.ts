import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 28 item 4: a workspace's failed deliveries across subscriptions (GET /api/v1/webhook-deliveries,
 * POST /api/v1/webhook-deliveries/retry) and each subscription's deliveries in a retry run now (its health): two
 * partial indexes, small because failed and pending deliveries are few beside the delivered ones.
 */
export class Migration20261128160100WebhookDeliveryHealth extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create index webhook_deliveries_failed_idx on webhook_deliveries (workspace_id, created_at desc, id desc) where status = 'failed'`);
    this.addSql(`create index webhook_deliveries_sub_pending_idx on webhook_deliveries (subscription_id) where status = 'pending'`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists webhook_deliveries_failed_idx');
    this.addSql('drop index if exists webhook_deliveries_sub_pending_idx');
  }
}
