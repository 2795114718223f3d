import { Migration } from '@mikro-orm/migrations';

/**
 * Credits: an append-only ledger (grants and spends, each with the balance after it)
 * and one balance row per workspace, locked by every spend, so a spend and the check
 * that allows it are one transaction and the balance never goes negative. A spend names
 * what it pays for (`reference`, unique): a retried spend is the same spend.
 */
export class Migration20261125180000CreditsLedger extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table credit_balances (
        workspace_id text primary key references workspaces(id) on delete cascade,
        balance bigint not null default 0 check (balance >= 0),
        granted bigint not null default 0,
        used bigint not null default 0,
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`
      create table credit_ledger (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        kind text not null check (kind in ('grant', 'spend')),
        amount bigint not null check (amount > 0),
        balance_after bigint not null check (balance_after >= 0),
        reason text not null,
        reference text,
        created_at timestamptz not null default clock_timestamp()
      )`);
    this.addSql(`create unique index credit_ledger_reference_uq on credit_ledger (workspace_id, reference) where reference is not null`);
    this.addSql(`create index credit_ledger_ws_idx on credit_ledger (workspace_id, created_at desc, id desc)`);
    this.addSql(`create index usage_records_ws_time_idx on usage_records (workspace_id, created_at)`);
    // What a usage row is for when it is neither a message nor an extraction (an agent reply's tokens: reply:<id>): counted once.
    this.addSql(`alter table usage_records add column reference text`);
    this.addSql(`alter table usage_records add constraint usage_records_reference_key unique (reference)`);
    // Append-only: a ledger entry is never changed or removed (a workspace's deletion takes its entries with it).
    this.addSql(`
      create function credit_ledger_append_only() returns trigger language plpgsql as $$
      begin
        raise exception 'credit_ledger is append-only';
      end $$`);
    this.addSql(`create trigger credit_ledger_no_update before update on credit_ledger for each row execute function credit_ledger_append_only()`);
  }

  override async down(): Promise<void> {
    this.addSql('drop trigger if exists credit_ledger_no_update on credit_ledger');
    this.addSql('drop function if exists credit_ledger_append_only()');
    this.addSql('drop index if exists usage_records_ws_time_idx');
    this.addSql('alter table usage_records drop column if exists reference');
    this.addSql('drop table if exists credit_ledger');
    this.addSql('drop table if exists credit_balances');
  }
}
