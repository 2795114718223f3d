import { Migration } from '@mikro-orm/migrations';

/**
 * Structured extractions (issue 17): one row per distinct request of a workspace (file
 * SHA-256 + schema + prompt hashed into `request_hash`), holding the document's text,
 * the outcome and its usage. The unique key makes the same request in the same workspace
 * find the stored result (or the run in progress), and never another workspace's.
 */
export class Migration20261125170000StructuredExtractions extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table structured_extractions (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      request_hash text not null,
      blob_key text not null,
      file_name text not null,
      mime_type text not null,
      kind text not null,
      schema jsonb not null,
      prompt text,
      status text not null check (status in ('running', 'succeeded', 'failed')),
      text text,
      chunk_count integer,
      data json,
      model text,
      failure text,
      error_message text,
      prompt_tokens integer not null default 0,
      completion_tokens integer not null default 0,
      model_calls integer not null default 0,
      pages integer,
      created_at timestamptz(3) not null default clock_timestamp(),
      updated_at timestamptz not null default now(),
      constraint structured_extractions_request_key unique (workspace_id, request_hash)
    )`);
    this.addSql('create index structured_extractions_blob_key_idx on structured_extractions (blob_key)');
    // Billing: one usage record per succeeded extraction (quantity: its pages).
    this.addSql('alter table usage_records add column extraction_id text constraint usage_records_extraction_id_key unique');
  }

  override async down(): Promise<void> {
    this.addSql('alter table usage_records drop column if exists extraction_id');
    this.addSql('drop table if exists structured_extractions');
  }
}
