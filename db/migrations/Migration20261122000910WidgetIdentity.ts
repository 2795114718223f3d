import { Migration } from '@mikro-orm/migrations';

/**
 * Widget identity: a web conversation remembers the external id of the verified visitor
 * who started it. Such a conversation is read and written only with a valid user_hash
 * for that same external id; one started by an anonymous or self-asserted visitor is
 * reached by its conversation id alone (the capability).
 */
export class Migration20261122000910WidgetIdentity extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table conversations add column verified_external_id text`);
    // Before this column, a self-asserted visitor was linked to the customer like a verified
    // one, so the two cannot be told apart: existing web conversations of a customer with an
    // external id fail closed (they now need that id's user_hash).
    this.addSql(`
      update conversations c set verified_external_id = (
        select i.value from customer_identities i
        where i.customer_id = c.customer_id and i.kind = 'external_id' order by i.created_at, i.value limit 1)
      where c.channel = 'web'`);
    // Init resumes a verified visitor's open conversation on the site.
    this.addSql(`create index conversations_web_owner_idx on conversations (site_id, verified_external_id) where channel = 'web' and status = 'open'`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists conversations_web_owner_idx');
    this.addSql('alter table conversations drop column if exists verified_external_id');
  }
}
