import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 30, the console's optional second factor: a TOTP secret per user (user_totp: sealed, confirmed by a first code,
 * the last accepted time step so a code works once; it goes with the user) and the workspace's rule that every
 * password sign-in needs one (sign_in_policies).
 */
export class Migration20261128210000ConsoleTotp extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table user_totp (
        user_id text primary key references console_users(id) on delete cascade,
        secret_sealed text not null,
        confirmed_at timestamptz,
        last_step bigint,
        created_at timestamptz not null default now()
      )`);
    this.addSql(`
      create table sign_in_policies (
        workspace_id text primary key references workspaces(id) on delete cascade,
        totp_required boolean not null,
        updated_at timestamptz not null default now()
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists sign_in_policies');
    this.addSql('drop table if exists user_totp');
  }
}
