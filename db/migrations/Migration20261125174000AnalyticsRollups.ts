import { Migration } from '@mikro-orm/migrations';

/**
 * Analytics stay fast at millions of messages without sampling: what they read is kept
 * up to date as rows are written, by triggers (so every write path counts, whatever code
 * wrote it), and backfilled here from the rows that exist.
 * - `analytics_conversations`, one row per conversation (its workspace, channel and start,
 *   copied when it is created): `first_in_at` (the customer's first message),
 *   `first_reply_at` (the first agent or human reply after it), `answered` (the agent
 *   replied at least once) and `handed_off` (a `handoff` on its timeline). A table of its
 *   own, so counting a message never locks the conversation's row (which the product's
 *   own writes hold); a covering index serves the summary from the index alone.
 * - `analytics_conversation_slots`: conversations started per workspace and 15-minute UTC
 *   slot (every zone's offset is a multiple of 15 minutes): a time series in any zone
 *   reads the window's whole slots here and its two partial slots from the rows.
 * - `analytics_message_hours`: transcript messages per workspace, UTC hour, channel and
 *   direction (`in`: the customer's; `out`: the agent's and human agents'; tool activity is
 *   not counted). A window's count is the full hours from here plus its two partial hours
 *   from the messages themselves: exact.
 */
export class Migration20261125174000AnalyticsRollups extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table analytics_conversations (
        conversation_id text primary key references conversations(id) on delete cascade,
        workspace_id text not null,
        channel text not null,
        created_at timestamptz not null,
        first_in_at timestamptz,
        first_reply_at timestamptz,
        answered boolean not null default false,
        handed_off boolean not null default false
      )`);
    this.addSql(`
      create table analytics_message_hours (
        workspace_id text not null references workspaces(id) on delete cascade,
        hour timestamptz not null,
        channel text not null,
        direction text not null check (direction in ('in', 'out')),
        messages bigint not null default 0,
        primary key (workspace_id, hour, channel, direction)
      )`);

    this.addSql(`
      create table analytics_conversation_slots (
        workspace_id text not null references workspaces(id) on delete cascade,
        slot timestamptz not null,
        conversations bigint not null default 0,
        primary key (workspace_id, slot)
      )`);
    // Backfill from the rows that exist (a function: a bulk load with the triggers off calls it too).
    this.addSql(`
      create function analytics_backfill() returns void language sql as $$
        insert into analytics_conversations (conversation_id, workspace_id, channel, created_at)
        select id, workspace_id, channel, created_at from conversations
        on conflict (conversation_id) do nothing;
        update analytics_conversations a set first_in_at = s.first_in, answered = s.answered
        from (select conversation_id, min(created_at) filter (where role = 'user') as first_in, bool_or(role = 'assistant') as answered
              from chat_messages group by conversation_id) s
        where s.conversation_id = a.conversation_id;
        update analytics_conversations a set first_reply_at = (
          select min(m.created_at) from chat_messages m where m.conversation_id = a.conversation_id and m.role in ('assistant', 'human') and m.created_at > a.first_in_at)
        where a.first_in_at is not null;
        delete from analytics_conversation_slots;
        insert into analytics_conversation_slots (workspace_id, slot, conversations)
        select workspace_id, date_bin('15 minutes', created_at, timestamptz '2000-01-01 00:00:00+00'), count(*) from analytics_conversations group by 1, 2;
        update analytics_conversations a set handed_off = exists (select 1 from conversation_events e where e.conversation_id = a.conversation_id and e.type = 'handoff');
        delete from analytics_message_hours;
        insert into analytics_message_hours (workspace_id, hour, channel, direction, messages)
        select m.workspace_id, date_trunc('hour', m.created_at at time zone 'UTC') at time zone 'UTC', c.channel,
               case when m.role = 'user' then 'in' else 'out' end, count(*)
        from chat_messages m join conversations c on c.id = m.conversation_id
        where m.role <> 'tool'
        group by 1, 2, 3, 4;
      $$`);
    this.addSql(`select analytics_backfill()`);

    this.addSql(`
      create function analytics_chat_message() returns trigger language plpgsql as $$
      declare
        msg chat_messages;
        ch text;
      begin
        msg := case when tg_op = 'DELETE' then old else new end;
        if msg.role = 'tool' then return null; end if;
        select channel into ch from conversations where id = msg.conversation_id;
        if ch is null then return null; end if; -- the conversation is being deleted with its messages
        insert into analytics_message_hours as h (workspace_id, hour, channel, direction, messages)
        values (msg.workspace_id, date_trunc('hour', msg.created_at at time zone 'UTC') at time zone 'UTC', ch,
                case when msg.role = 'user' then 'in' else 'out' end, case when tg_op = 'DELETE' then -1 else 1 end)
        on conflict (workspace_id, hour, channel, direction) do update set messages = h.messages + excluded.messages;
        if tg_op = 'DELETE' then
          update analytics_conversations a set
            first_in_at = (select min(created_at) from chat_messages where conversation_id = a.conversation_id and role = 'user'),
            answered = exists (select 1 from chat_messages where conversation_id = a.conversation_id and role = 'assistant')
          where a.conversation_id = msg.conversation_id;
        elsif msg.role = 'user' then
          update analytics_conversations set first_in_at = msg.created_at
          where conversation_id = msg.conversation_id and (first_in_at is null or first_in_at > msg.created_at);
        else
          update analytics_conversations set
            answered = answered or msg.role = 'assistant',
            first_reply_at = case when first_in_at is not null and msg.created_at > first_in_at and (first_reply_at is null or first_reply_at > msg.created_at)
                                  then msg.created_at else first_reply_at end
          where conversation_id = msg.conversation_id
            and ((msg.role = 'assistant' and not answered)
                 or (first_in_at is not null and msg.created_at > first_in_at and (first_reply_at is null or first_reply_at > msg.created_at)));
        end if;
        return null;
      end $$`);
    this.addSql(`create trigger chat_messages_analytics after insert or delete on chat_messages for each row execute function analytics_chat_message()`);
    this.addSql(`
      create function analytics_conversation_event() returns trigger language plpgsql as $$
      begin
        if new.type = 'handoff' then update analytics_conversations set handed_off = true where conversation_id = new.conversation_id and not handed_off; end if;
        return null;
      end $$`);
    this.addSql(`create trigger conversation_events_analytics after insert on conversation_events for each row execute function analytics_conversation_event()`);
    this.addSql(`
      create function analytics_conversation() returns trigger language plpgsql as $$
      begin
        insert into analytics_conversations (conversation_id, workspace_id, channel, created_at)
        values (new.id, new.workspace_id, new.channel, new.created_at) on conflict (conversation_id) do nothing;
        return null;
      end $$`);
    this.addSql(`create trigger conversations_analytics after insert on conversations for each row execute function analytics_conversation()`);
    this.addSql(`
      create function analytics_conversation_slot() returns trigger language plpgsql as $$
      declare
        r analytics_conversations;
      begin
        r := case when tg_op = 'DELETE' then old else new end;
        insert into analytics_conversation_slots as s (workspace_id, slot, conversations)
        values (r.workspace_id, date_bin('15 minutes', r.created_at, timestamptz '2000-01-01 00:00:00+00'), case when tg_op = 'DELETE' then -1 else 1 end)
        on conflict (workspace_id, slot) do update set conversations = s.conversations + excluded.conversations;
        return null;
      exception when foreign_key_violation then
        return null; -- the workspace is being deleted with everything in it
      end $$`);
    this.addSql(`create trigger analytics_conversations_slots after insert or delete on analytics_conversations for each row execute function analytics_conversation_slot()`);
    this.addSql(`create index analytics_conversations_ws_idx on analytics_conversations (workspace_id, created_at) include (channel, answered, handed_off, first_in_at, first_reply_at)`);
  }

  override async down(): Promise<void> {
    this.addSql('drop trigger if exists conversation_events_analytics on conversation_events');
    this.addSql('drop function if exists analytics_conversation_event()');
    this.addSql('drop trigger if exists conversations_analytics on conversations');
    this.addSql('drop function if exists analytics_conversation()');
    this.addSql('drop trigger if exists chat_messages_analytics on chat_messages');
    this.addSql('drop function if exists analytics_chat_message()');
    this.addSql('drop function if exists analytics_backfill()');
    this.addSql('drop table if exists analytics_message_hours');
    this.addSql('drop table if exists analytics_conversations');
    this.addSql('drop function if exists analytics_conversation_slot()');
    this.addSql('drop table if exists analytics_conversation_slots');
  }
}
