import { Migration } from '@mikro-orm/migrations';

/**
 * Knowledge-base documents, their file versions and searchable passages.
 * A document is a name in a folder; each upload of that name is a new file version;
 * the highest remaining version is current. Passages belong to one file version.
 */
export class Migration20261122000300KnowledgeBase extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table kb_documents (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        folder_id text references kb_folders(id) on delete restrict,
        name text not null,
        created_at timestamptz not null default now()
      )`);
    this.addSql(`create unique index kb_documents_name_uq on kb_documents (workspace_id, coalesce(folder_id, ''), name)`);

    this.addSql(`
      create table kb_files (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        document_id text not null references kb_documents(id) on delete cascade,
        version integer not null,
        is_current boolean not null default true,
        name text not null,
        status text not null check (status in ('pending', 'processing', 'active', 'error')),
        error_message text,
        mime_type text not null,
        kind text not null,
        file_size bigint not null,
        sha256 text not null,
        chunk_count integer not null default 0,
        -- Set once the indexing workflow is known to be started (the outbox relay).
        index_dispatched_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        unique (document_id, version)
      )`);
    // One current version per document.
    this.addSql(`create unique index kb_files_current_uq on kb_files (document_id) where is_current`);
    this.addSql(`create index kb_files_list_idx on kb_files (workspace_id, created_at desc, id desc) where is_current`);
    this.addSql(`create index kb_files_undispatched_idx on kb_files (created_at) where index_dispatched_at is null`);
    this.addSql(`create index kb_files_sha_idx on kb_files (sha256)`);

    this.addSql(`
      create table kb_chunks (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        file_id text not null references kb_files(id) on delete cascade,
        ordinal integer not null,
        text text not null,
        heading text,
        page integer,
        sheet text,
        row_from integer,
        row_to integer,
        slide integer,
        char_start integer not null,
        embedding bytea,
        embedding_model text,
        embedding_dim integer,
        tsv tsvector generated always as (
          setweight(to_tsvector('english', coalesce(heading, '')), 'A') || setweight(to_tsvector('english', text), 'B')
        ) stored,
        unique (file_id, ordinal)
      )`);
    this.addSql(`create index kb_chunks_tsv_idx on kb_chunks using gin (tsv)`);
    this.addSql(`create index kb_chunks_ws_idx on kb_chunks (workspace_id)`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists kb_chunks');
    this.addSql('drop table if exists kb_files');
    this.addSql('drop table if exists kb_documents');
  }
}
