import { Migration } from '@mikro-orm/migrations';

/**
 * Dial-out destinations (toll fraud): each workspace's allowed countries and number types
 * (null: every country, the default types), and each call's price class and per-minute
 * price, fixed when it is placed so a later price change never reprices a running call.
 */
export class Migration20261128020000DialOutPolicy extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table workspaces add column dial_out_countries text[] null, add column dial_out_number_types text[] null`);
    this.addSql(`alter table calls add column destination_class text null, add column credits_per_minute integer null`);
    this.addSql(`alter table calls add constraint calls_destination_class_check check (destination_class in ('fixed', 'mobile', 'other'))`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table calls drop constraint if exists calls_destination_class_check`);
    this.addSql(`alter table calls drop column if exists destination_class, drop column if exists credits_per_minute`);
    this.addSql(`alter table workspaces drop column if exists dial_out_countries, drop column if exists dial_out_number_types`);
  }
}
