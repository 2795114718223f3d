import { Migration } from '@mikro-orm/migrations';

/**
 * Test conversations (the console's "Try it" panel, POST /api/console/agents/{id}/try): `conversations.is_test`,
 * set only when such a conversation is made, never changed after. They stay out of the inbox, the conversation
 * lists, analytics and billing: the analytics triggers of Migration20261125174000AnalyticsRollups count nothing of
 * them (no analytics_conversations row, no message hours), and the backfill skips them too.
 */
export class Migration20261128221000AgentTry extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table conversations add column is_test boolean not null default false');
    this.addSql(`
      create or replace function analytics_conversation() returns trigger language plpgsql as $$
      begin
        if new.is_test then return null; end if; -- a console test conversation counts nowhere
        insert into analytics_conversations (conversation_id, workspace_id, channel, created_at)
        values (new.id, new.workspace_id, new.channel, new.created_at) on conflict (conversation_id) do nothing;
        return null;
      end $$`);
    this.addSql(`
      create or replace function analytics_chat_message() returns trigger language plpgsql as $$
      declare
        msg chat_messages;
        ch text;
      begin
        msg := case when tg_op = 'DELETE' then old else new end;
        if msg.role = 'tool' then return null; end if;
        -- A test conversation's messages count nowhere either (as a conversation being deleted: no channel).
        select channel into ch from conversations where id = msg.conversation_id and not is_test;
        if ch is null then return null; end if;
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
    this.addSql(`
      create or replace function analytics_backfill() returns void language sql as $$
        insert into analytics_conversations (conversation_id, workspace_id, channel, created_at)
        select id, workspace_id, channel, created_at from conversations where not is_test
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
        where m.role <> 'tool' and not c.is_test
        group by 1, 2, 3, 4;
      $$`);
  }

  override async down(): Promise<void> {
    // The functions as Migration20261125174000AnalyticsRollups made them, once the column they read is gone.
    this.addSql(`
      create or replace function analytics_conversation() returns trigger language plpgsql as $$
      begin
        insert into analytics_conversations (conversation_id, workspace_id, channel, created_at)
        values (new.id, new.workspace_id, new.channel, new.created_at) on conflict (conversation_id) do nothing;
        return null;
      end $$`);
    this.addSql(`
      create or replace function analytics_chat_message() returns trigger language plpgsql as $$
      declare
        msg chat_messages;
        ch text;
      begin
        msg := case when tg_op = 'DELETE' then old else new end;
        if msg.role = 'tool' then return null; end if;
        select channel into ch from conversations where id = msg.conversation_id;
        if ch is null then return null; end if;
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
    this.addSql(`
      create or replace function analytics_backfill() returns void language sql as $$
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
    this.addSql('alter table conversations drop column if exists is_test');
  }
}
