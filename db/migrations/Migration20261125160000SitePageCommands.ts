import { Migration } from '@mikro-orm/migrations';

/**
 * Page commands (`ui:command` frames) are off unless a site lists the commands its page
 * handles: `ui_commands` is that allow-list (empty: off, the default).
 */
export class Migration20261125160000SitePageCommands extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table sites add column ui_commands text[] not null default '{}'`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table sites drop column if exists ui_commands');
  }
}
