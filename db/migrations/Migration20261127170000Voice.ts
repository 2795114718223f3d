import { Migration } from '@mikro-orm/migrations';

/**
 * Voice: browser voice sessions, dial-out calls, their recordings, and the recorder's
 * spooled PCM chunks (so a call whose worker died still has its audio up to that point).
 */
export class Migration20261127170000Voice extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table voice_sessions (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        site_id text,
        conversation_id text not null,
        agent_id text not null,
        customer_id text,
        transport text not null check (transport in ('direct', 'livekit')),
        room_name text not null,
        status text not null check (status in ('starting', 'live', 'ended', 'failed')),
        end_reason text,
        offer_sdp text,
        answer_sdp text,
        credits_spent integer not null default 0,
        connected_at timestamptz,
        ended_at timestamptz,
        duration_ms integer,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create index voice_sessions_active_idx on voice_sessions (workspace_id) where status in ('starting', 'live')`);
    this.addSql(`create index voice_sessions_conv_idx on voice_sessions (conversation_id)`);
    this.addSql(`
      create table calls (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        conversation_id text not null,
        agent_id text not null,
        site_id text,
        direction text not null default 'outbound' check (direction in ('outbound')),
        phone text not null,
        provider text not null,
        status text not null check (status in ('calling', 'ringing', 'in_progress', 'completed', 'failed', 'no_answer', 'busy')),
        status_history jsonb not null default '[]',
        error text,
        credits_spent integer not null default 0,
        answered_at timestamptz,
        ended_at timestamptz,
        duration_ms integer,
        created_at timestamptz(3) not null default clock_timestamp(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create index calls_ws_idx on calls (workspace_id, created_at desc, id desc)`);
    this.addSql(`create index calls_active_idx on calls (workspace_id) where status in ('calling', 'ringing', 'in_progress')`);
    this.addSql(`
      create table recordings (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        conversation_id text not null,
        voice_session_id text,
        call_id text,
        kind text not null check (kind in ('caller', 'agent', 'combined')),
        blob_sha256 text not null,
        mime_type text not null,
        channels integer not null,
        duration_ms integer not null,
        bytes bigint not null,
        created_at timestamptz not null default now(),
        unique (voice_session_id, kind),
        unique (call_id, kind),
        check ((voice_session_id is null) <> (call_id is null))
      )`);
    this.addSql(`create index recordings_conv_idx on recordings (conversation_id, created_at)`);
    this.addSql(`
      create table voice_recording_chunks (
        session_id text not null,
        track text not null check (track in ('caller', 'agent')),
        seq integer not null,
        start_sample bigint not null,
        blob_sha256 text not null,
        created_at timestamptz not null default now(),
        primary key (session_id, track, seq)
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists voice_recording_chunks');
    this.addSql('drop table if exists recordings');
    this.addSql('drop table if exists calls');
    this.addSql('drop table if exists voice_sessions');
  }
}
