import { Migration } from '@mikro-orm/migrations';

/**
 * A workspace team's availability (domain/team): business hours in an IANA zone (weekly
 * wall-clock openings, `[{day, open, close}]`; empty: always open), the "away" switch with
 * its message, and the typical reply time. One row per workspace, made on its first change;
 * a workspace without one has the defaults (UTC, always open, not away).
 */
export class Migration20261128140200TeamAvailability extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table team_availability (
        workspace_id text primary key references workspaces(id) on delete cascade,
        timezone text not null default 'UTC' check (char_length(timezone) between 1 and 64),
        hours jsonb not null default '[]' check (jsonb_typeof(hours) = 'array'),
        away boolean not null default false,
        away_message text check (char_length(away_message) between 1 and 500),
        reply_time_minutes integer check (reply_time_minutes between 1 and 10080),
        updated_at timestamptz not null default now()
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists team_availability');
  }
}
