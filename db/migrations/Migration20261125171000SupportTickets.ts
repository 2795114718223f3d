import { Migration } from '@mikro-orm/migrations';

/**
 * Support tickets from a workspace to the platform operator, and their threads. A
 * workspace lists its own tickets newest first (keyset on created_at, id); the operator
 * lists every workspace's by status.
 */
export class Migration20261125171000SupportTickets extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table support_tickets (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        subject text not null check (char_length(subject) between 1 and 200),
        priority text not null check (priority in ('low', 'normal', 'high', 'urgent')),
        status text not null check (status in ('open', 'waiting_on_customer', 'closed')),
        created_at timestamptz(3) not null default clock_timestamp(),
        updated_at timestamptz not null default now(),
        closed_at timestamptz,
        check ((status = 'closed') = (closed_at is not null))
      )`);
    this.addSql('create index support_tickets_workspace_created_idx on support_tickets (workspace_id, created_at desc, id desc)');
    this.addSql('create index support_tickets_status_created_idx on support_tickets (status, created_at desc, id desc)');
    this.addSql(`
      create table support_ticket_messages (
        id text primary key,
        ticket_id text not null references support_tickets(id) on delete cascade,
        author text not null check (author in ('customer', 'operator')),
        body text not null check (char_length(body) between 1 and 20000),
        created_at timestamptz(3) not null default clock_timestamp()
      )`);
    this.addSql('create index support_ticket_messages_ticket_idx on support_ticket_messages (ticket_id, created_at, id)');
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists support_ticket_messages');
    this.addSql('drop table if exists support_tickets');
  }
}
