import { Migration } from '@mikro-orm/migrations';

/**
 * The msgapp webhook's inbound messages as received: stored once per provider message id
 * (the webhook answers 200 as soon as the row commits), then relayed by the worker's
 * outbox dispatcher to one `msgapp-inbound:<provider message id>` workflow each
 * (customer and conversation, media download, `message.inbound`). `dispatched_at`: the
 * workflow was started; `recorded_message_id`: the message row it recorded.
 */
export class Migration20261125000100MsgappInboundEvents extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table msgapp_inbound_events (
        provider_message_id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        agent_id text not null references agents(id) on delete cascade,
        message jsonb not null,
        received_at timestamptz not null default now(),
        dispatched_at timestamptz,
        recorded_message_id text
      )`);
    this.addSql(`create index msgapp_inbound_events_undispatched_idx on msgapp_inbound_events (received_at) where dispatched_at is null`);
    this.addSql(`create index msgapp_inbound_events_workspace_idx on msgapp_inbound_events (workspace_id)`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists msgapp_inbound_events');
  }
}
