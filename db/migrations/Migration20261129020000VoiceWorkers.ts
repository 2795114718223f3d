import { Migration } from '@mikro-orm/migrations';

/**
 * Voice capacity per worker (issue 32, concurrency): each worker that runs voice reports its VOICE_WORKER_CAPACITY
 * every 10 s; the installation takes as many live sessions and calls as the sum over the workers heard from in the
 * last 30 s (domain/voice/sessions.ts). A worker that stops deletes its row; one that dies stops counting after 30 s.
 */
export class Migration20261129020000VoiceWorkers extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table voice_workers (
        id text primary key,
        capacity integer not null check (capacity > 0),
        heartbeat_at timestamptz not null,
        started_at timestamptz not null
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table voice_workers');
  }
}
