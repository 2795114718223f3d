import { Migration } from '@mikro-orm/migrations';

/** Agents (a spec document, draft or published), customers with their identities, conversations and their timeline. */
export class Migration20261122000400AgentsCustomers extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table agents (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        name text not null,
        status text not null check (status in ('draft', 'published')),
        spec jsonb not null,
        -- Why a published agent cannot run (empty when it can); what sender_agent_invalid reports.
        invalid_reasons text[] not null default '{}',
        published_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create index agents_ws_idx on agents (workspace_id, created_at desc, id desc)`);
    // Which published agent owns a msgapp number is asked on every send.
    this.addSql(`create index agents_msgapp_number_idx on agents (workspace_id, (spec #>> '{triggers,msgapp,number}')) where status = 'published'`);

    this.addSql(`
      create table customers (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        name text,
        email text,
        phone text,
        external_id text,
        metadata jsonb not null default '{}',
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create index customers_ws_idx on customers (workspace_id, created_at desc, id desc)`);
    // One customer per identity: the same phone, email or external id never names two customers.
    this.addSql(`
      create table customer_identities (
        workspace_id text not null references workspaces(id) on delete cascade,
        kind text not null check (kind in ('phone', 'email', 'external_id')),
        value text not null,
        customer_id text not null references customers(id) on delete cascade,
        created_at timestamptz not null default now(),
        primary key (workspace_id, kind, value)
      )`);
    this.addSql(`create index customer_identities_customer_idx on customer_identities (customer_id)`);

    this.addSql(`
      create table conversations (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        customer_id text references customers(id) on delete set null,
        agent_id text references agents(id) on delete set null,
        channel text not null check (channel in ('msgapp', 'web', 'voice')),
        status text not null check (status in ('open', 'closed')),
        needs_human boolean not null default false,
        case_reason text,
        last_inbound_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create index conversations_ws_idx on conversations (workspace_id, created_at desc, id desc)`);
    this.addSql(`create index conversations_cases_idx on conversations (workspace_id, created_at desc, id desc) where needs_human`);

    this.addSql(`
      create table conversation_events (
        id text primary key,
        conversation_id text not null references conversations(id) on delete cascade,
        type text not null,
        data jsonb not null default '{}',
        created_at timestamptz not null default clock_timestamp()
      )`);
    this.addSql(`create index conversation_events_conv_idx on conversation_events (conversation_id, created_at, id)`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists conversation_events');
    this.addSql('drop table if exists conversations');
    this.addSql('drop table if exists customer_identities');
    this.addSql('drop table if exists customers');
    this.addSql('drop table if exists agents');
  }
}
