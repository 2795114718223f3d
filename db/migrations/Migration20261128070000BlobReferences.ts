import { Migration } from '@mikro-orm/migrations';

/**
 * Blob references (docs/security.md, "Shared bytes are deleted last"). The blob store is content-addressed
 * and shared by every owner of bytes, across workspaces; a blob may be deleted only when no
 * owner refers to it (domain/storage/blob-refs.ts asks every owner table). This adds:
 * - `blob_holds`: owners with no row of their own, whose bytes must outlive any other
 *   owner's delete while they run (a widget voice note being transcribed);
 * - indexes so each owner's look-up by SHA-256 is an index probe: recordings, the voice
 *   spool, and inbound msgapp media inside `chat_messages.attachments` (jsonb containment).
 */
export class Migration20261128070000BlobReferences extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table blob_holds (
        id text primary key,
        sha256 text not null,
        created_at timestamptz not null default now()
      )`);
    this.addSql(`create index blob_holds_sha_idx on blob_holds (sha256)`);
    this.addSql(`create index recordings_blob_idx on recordings (blob_sha256)`);
    this.addSql(`create index voice_recording_chunks_blob_idx on voice_recording_chunks (blob_sha256)`);
    this.addSql(`create index chat_messages_attachments_idx on chat_messages using gin (attachments jsonb_path_ops)`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists chat_messages_attachments_idx');
    this.addSql('drop index if exists voice_recording_chunks_blob_idx');
    this.addSql('drop index if exists recordings_blob_idx');
    this.addSql('drop table if exists blob_holds');
  }
}
