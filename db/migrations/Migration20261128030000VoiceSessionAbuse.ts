import { Migration } from '@mikro-orm/migrations';

/**
 * Voice sessions remember who started them and whether their room token was used:
 * `visitor_key` (the visitor's customer, else conversation) and `client_address` (the
 * start request's address) count a visitor's and an address's sessions at once;
 * `rtc_claimed_at` is set by the first signalling socket that joins with the session's
 * rtc_token, so the token is single-use and one socket speaks for the room.
 */
export class Migration20261128030000VoiceSessionAbuse extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table voice_sessions add column visitor_key text, add column client_address text, add column rtc_claimed_at timestamptz`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table voice_sessions drop column visitor_key, drop column client_address, drop column rtc_claimed_at`);
  }
}
