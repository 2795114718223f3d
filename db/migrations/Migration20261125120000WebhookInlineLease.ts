import { Migration } from '@mikro-orm/migrations';

/**
 * The first attempt of a webhook delivery is made by the outbox dispatcher itself; while
 * its POST is open the row carries `inline_lease_until` (now + the attempt's time-out +
 * a margin), so no other dispatcher picks it up and POSTs twice. A dispatcher lost
 * mid-attempt leaves the lease to expire and the delivery is picked up again.
 */
export class Migration20261125120000WebhookInlineLease extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table webhook_deliveries add column inline_lease_until timestamptz`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table webhook_deliveries drop column if exists inline_lease_until');
  }
}
