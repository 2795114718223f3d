import { Migration } from '@mikro-orm/migrations';

/**
 * A site's look and language (widget init's `appearance`). Null is "not set": the widget
 * gets the default (domain/widget/appearance.ts DEFAULT_APPEARANCE), so a later change of a
 * default reaches every site that never chose.
 */
export class Migration20261128140100SiteAppearance extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table sites
        add column brand_color text check (brand_color ~ '^#[0-9a-f]{6}$'),
        add column launcher_position text check (launcher_position in ('right', 'left')),
        add column launcher_label text check (char_length(launcher_label) between 1 and 40),
        add column theme text check (theme in ('light', 'dark', 'auto')),
        add column language text check (language in ('auto', 'en', 'es', 'fr', 'de', 'pt', 'ar'))`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table sites drop column if exists brand_color, drop column if exists launcher_position, drop column if exists launcher_label, drop column if exists theme, drop column if exists language');
  }
}
