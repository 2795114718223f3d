import { Migration } from '@mikro-orm/migrations';

/** Web-chat sites: the public id a widget presents, its allowed origins, and its signing secrets. */
export class Migration20261122000700Sites extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table sites (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        agent_id text not null references agents(id) on delete cascade,
        allowed_origins text[] not null,
        status text not null check (status in ('active', 'suspended')),
        secret_sealed text not null,
        -- After a rotation the previous secret still verifies user_hash until it expires.
        previous_secret_sealed text,
        previous_expires_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists sites');
  }
}
