import { Migration } from '@mikro-orm/migrations';

/**
 * A knowledge-base file's title (issue 27 item 6: citations name a source by its real title).
 * Recorded when the file is indexed (domain/kb/indexing.ts): its first heading, else the title
 * it declares (HTML <title>). Files indexed before are given their first passage heading
 * here, in one pass over the passages (no per-file look-up).
 */
export class Migration20261128150000KbFileTitle extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table kb_files add column title text null');
    this.addSql(`
      update kb_files f set title = left(h.heading, 200)
      from (select distinct on (file_id) file_id, heading from kb_chunks where heading is not null and btrim(heading) <> '' order by file_id, ordinal) h
      where h.file_id = f.id`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table kb_files drop column if exists title');
  }
}
