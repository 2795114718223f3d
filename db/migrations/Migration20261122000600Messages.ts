import { Migration } from '@mikro-orm/migrations';

/** Provider credentials (sealed), messages on the msgapp channel, and one usage row per message for billing. */
export class Migration20261122000600Messages extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table credentials (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        kind text not null check (kind in ('msgapp_access_token')),
        name text not null,
        secret_sealed text not null,
        created_at timestamptz not null default now()
      )`);

    this.addSql(`
      create table messages (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        conversation_id text references conversations(id) on delete set null,
        customer_id text references customers(id) on delete set null,
        agent_id text references agents(id) on delete set null,
        direction text not null check (direction in ('outbound', 'inbound')),
        -- 'api': sent through POST /api/v1/messages (the only ones GET /api/v1/messages lists).
        source text not null check (source in ('api', 'agent', 'customer')),
        channel text not null check (channel in ('msgapp')),
        from_number text not null,
        to_number text not null,
        kind text not null check (kind in ('text', 'template', 'image', 'audio', 'video', 'document', 'location')),
        text text,
        template_name text,
        content jsonb not null,
        status text not null check (status in ('sending', 'sent', 'delivered', 'read', 'failed', 'received')),
        status_history jsonb not null default '[]',
        error text,
        provider_message_id text,
        created_at timestamptz(3) not null default clock_timestamp(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create unique index messages_provider_id_uq on messages (workspace_id, provider_message_id) where provider_message_id is not null`);
    this.addSql(`create index messages_api_list_idx on messages (workspace_id, created_at desc, id desc) where source = 'api'`);
    // The 24-hour window: the customer's last inbound message on a number.
    this.addSql(`create index messages_inbound_window_idx on messages (workspace_id, from_number, to_number, created_at desc) where direction = 'inbound'`);

    this.addSql(`
      create table usage_records (
        id bigserial primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        kind text not null,
        message_id text unique references messages(id) on delete set null,
        quantity integer not null default 1,
        created_at timestamptz not null default now()
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists usage_records');
    this.addSql('drop table if exists messages');
    this.addSql('drop table if exists credentials');
  }
}
