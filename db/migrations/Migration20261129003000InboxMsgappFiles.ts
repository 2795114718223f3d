import { Migration } from '@mikro-orm/migrations';

/**
 * A file a person attaches to an inbox reply on msgapp (issue 31, attaches files): stored as the widget's uploads are,
 * as an upload of its conversation, but a msgapp conversation has no site, so `widget_uploads.site_id` may be null.
 * The widget's own paths still find an upload by its site (a row without one is never the widget's), and every upload
 * the widget makes names its site, as before.
 */
export class Migration20261129003000InboxMsgappFiles extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table widget_uploads alter column site_id drop not null`);
  }

  override async down(): Promise<void> {
    this.addSql(`delete from widget_uploads where site_id is null`);
    this.addSql(`alter table widget_uploads alter column site_id set not null`);
  }
}
