import { Migration } from '@mikro-orm/migrations';

/**
 * Credits: a third ledger kind, `refund`, returning a spend that bought nothing (a voice
 * session or call that failed to start after its first minute was paid). Its reference is
 * the spend's plus `:refund`, unique like every reference, so a spend is refunded once.
 */
export class Migration20261127200000CreditRefunds extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table credit_ledger drop constraint credit_ledger_kind_check`);
    this.addSql(`alter table credit_ledger add constraint credit_ledger_kind_check check (kind in ('grant', 'spend', 'refund'))`);
  }

  override async down(): Promise<void> {
    this.addSql(`delete from credit_ledger where kind = 'refund'`);
    this.addSql(`alter table credit_ledger drop constraint credit_ledger_kind_check`);
    this.addSql(`alter table credit_ledger add constraint credit_ledger_kind_check check (kind in ('grant', 'spend'))`);
  }
}
