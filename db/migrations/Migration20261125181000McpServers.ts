import { Migration } from '@mikro-orm/migrations';

/** Remote MCP tool servers a workspace registers: the URL, an optional credential, and what the last check found. */
export class Migration20261125181000McpServers extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table mcp_servers (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        name text not null,
        url text not null,
        credential_id text,
        enabled boolean not null default true,
        status text not null check (status in ('ok', 'error', 'disabled')),
        tools jsonb not null default '[]',
        last_error text,
        checked_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create index mcp_servers_ws_idx on mcp_servers (workspace_id, created_at desc, id desc)`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists mcp_servers');
  }
}
