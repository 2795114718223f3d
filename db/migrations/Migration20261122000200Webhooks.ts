import { Migration } from '@mikro-orm/migrations';

/** Webhook subscriptions, the event outbox, deliveries and their attempt log. */
export class Migration20261122000200Webhooks extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table webhook_subscriptions (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        url text not null,
        events text[] not null,
        status text not null check (status in ('active', 'disabled')),
        secret_sealed text not null,
        consecutive_failures integer not null default 0,
        last_error text,
        last_failed_at timestamptz,
        last_delivered_at timestamptz,
        disabled_reason text,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create index webhook_subscriptions_ws_idx on webhook_subscriptions (workspace_id, created_at)`);

    // The outbox: an event row is written in the producer's transaction, with one
    // delivery row per subscriber; the body is serialised once, here, and sent as is.
    this.addSql(`
      create table webhook_events (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        type text not null,
        payload text not null,
        created_at timestamptz not null default now()
      )`);

    this.addSql(`
      create table webhook_deliveries (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        event_id text not null references webhook_events(id) on delete cascade,
        subscription_id text not null references webhook_subscriptions(id) on delete cascade,
        event_type text not null,
        status text not null check (status in ('pending', 'delivered', 'failed')),
        attempt_count integer not null default 0,
        last_status_code integer,
        last_error text,
        -- Set once a delivery workflow is known to be started for the current run.
        dispatched_at timestamptz,
        -- Bumped by retry/replay; the workflow id carries it so each run is its own workflow.
        run integer not null default 1,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        completed_at timestamptz,
        unique (event_id, subscription_id)
      )`);
    this.addSql(`create index webhook_deliveries_sub_idx on webhook_deliveries (subscription_id, created_at desc, id desc)`);
    this.addSql(`create index webhook_deliveries_undispatched_idx on webhook_deliveries (created_at) where dispatched_at is null`);

    this.addSql(`
      create table webhook_attempts (
        delivery_id text not null references webhook_deliveries(id) on delete cascade,
        run integer not null,
        attempt integer not null,
        started_at timestamptz not null,
        status_code integer,
        error text,
        latency_ms integer not null,
        response_body text,
        primary key (delivery_id, run, attempt)
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists webhook_attempts');
    this.addSql('drop table if exists webhook_deliveries');
    this.addSql('drop table if exists webhook_events');
    this.addSql('drop table if exists webhook_subscriptions');
  }
}
