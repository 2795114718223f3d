import { Migration } from '@mikro-orm/migrations';

/**
 * People's wait and handle times (issue 31), per conversation in `analytics_conversations`, kept by the trigger on
 * `conversation_events` from the inbox's timeline entries (domain/conversations/inbox.ts), so the console's analytics
 * read them with the summary's (workspace_id, created_at) index, however many messages there are:
 * - `human_assignments`: `inbox.assigned` entries (a take, an assignment, a pass from one person to another);
 * - `human_wait_ms`: time spent in the queue before a person took it, summed over its stays in the queue;
 * - `human_handle_ms`: time people held it, summed (`handle_ms` of `inbox.handed_back`, `inbox.closed` and
 *   `inbox.requeued`, and a passed conversation's previous holder's time);
 * - `human_held`: a person holds it now (its handle time is not final: the console's percentiles leave it out);
 * - `human_counted_ms`: of the time since its current stay in the queue began, what is counted already. A re-queued
 *   conversation keeps its place (`queued_at` unchanged), so its next `wait_ms` runs from the stay's start again and
 *   includes the waits and holds counted before: only the rest is new. A `wait_ms` below it means a new stay the
 *   timeline did not show ending (it never runs backwards within one): all of it is new.
 * A stay ends with `inbox.handed_back`, `inbox.closed` or `case_resolved` (PATCH needs_human false, which records no
 * handle time). Test conversations have no row here (Migration20261128221000AgentTry): their entries change nothing.
 */
export class Migration20261128233000InboxTimes extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table analytics_conversations
        add column human_assignments integer not null default 0,
        add column human_wait_ms bigint not null default 0,
        add column human_handle_ms bigint not null default 0,
        add column human_counted_ms bigint not null default 0,
        add column human_held boolean not null default false`);
    // A duration as the timeline wrote it, in whole milliseconds; 0 when absent, null or not a number (a trigger that
    // failed on a bad value would fail the action that wrote it).
    this.addSql(`
      create function analytics_ms(v jsonb) returns bigint language sql immutable as $$
        select case when jsonb_typeof(v) = 'number' then least(greatest(round(v::text::numeric), 0), 9007199254740991)::bigint else 0 end
      $$`);
    this.addSql(`
      create function analytics_inbox_event(e conversation_events) returns void language plpgsql as $$
      declare
        ms bigint;
        passed boolean := e.data->>'from' is not null;
      begin
        if e.type = 'inbox.assigned' then
          ms := analytics_ms(e.data->'wait_ms');
          -- Passed on from a holder ('from'): the new part was the previous holder's time; else it waited in the queue.
          update analytics_conversations set
            human_assignments = human_assignments + 1,
            human_wait_ms = human_wait_ms + case when passed then 0 when ms >= human_counted_ms then ms - human_counted_ms else ms end,
            human_handle_ms = human_handle_ms + case when not passed then 0 when ms >= human_counted_ms then ms - human_counted_ms else ms end,
            human_counted_ms = ms,
            human_held = true
          where conversation_id = e.conversation_id;
        elsif e.type in ('inbox.handed_back', 'inbox.closed', 'inbox.requeued', 'case_resolved') then
          ms := analytics_ms(e.data->'handle_ms'); -- null: nobody held it
          update analytics_conversations set
            human_handle_ms = human_handle_ms + ms,
            human_counted_ms = case when e.type = 'inbox.requeued' then human_counted_ms + ms else 0 end,
            human_held = false
          where conversation_id = e.conversation_id and (human_held or human_counted_ms <> 0 or ms <> 0);
        end if;
      end $$`);
    this.addSql(`
      create or replace function analytics_conversation_event() returns trigger language plpgsql as $$
      begin
        if new.type = 'handoff' then update analytics_conversations set handed_off = true where conversation_id = new.conversation_id and not handed_off;
        elsif new.type in ('inbox.assigned', 'inbox.handed_back', 'inbox.closed', 'inbox.requeued', 'case_resolved') then perform analytics_inbox_event(new);
        end if;
        return null;
      end $$`);
    // Replays the timeline's entries in order (the inbox is new: few of them).
    this.addSql(`
      create function analytics_inbox_backfill() returns void language plpgsql as $$
      declare
        e conversation_events;
      begin
        update analytics_conversations set human_assignments = 0, human_wait_ms = 0, human_handle_ms = 0, human_counted_ms = 0, human_held = false
        where human_assignments <> 0 or human_handle_ms <> 0 or human_counted_ms <> 0 or human_held;
        for e in
          select ev.* from conversation_events ev join analytics_conversations a on a.conversation_id = ev.conversation_id
          where ev.type in ('inbox.assigned', 'inbox.handed_back', 'inbox.closed', 'inbox.requeued', 'case_resolved')
          order by ev.conversation_id, ev.created_at, ev.id
        loop
          perform analytics_inbox_event(e);
        end loop;
      end $$`);
    this.addSql(backfill(true));
    this.addSql(`select analytics_inbox_backfill()`);
  }

  override async down(): Promise<void> {
    this.addSql(backfill(false));
    this.addSql(`
      create or replace function analytics_conversation_event() returns trigger language plpgsql as $$
      begin
        if new.type = 'handoff' then update analytics_conversations set handed_off = true where conversation_id = new.conversation_id and not handed_off; end if;
        return null;
      end $$`);
    this.addSql('drop function if exists analytics_inbox_backfill()');
    this.addSql('drop function if exists analytics_inbox_event(conversation_events)');
    this.addSql('drop function if exists analytics_ms(jsonb)');
    this.addSql(
      'alter table analytics_conversations drop column human_held, drop column human_counted_ms, drop column human_handle_ms, drop column human_wait_ms, drop column human_assignments',
    );
  }
}

/** `analytics_backfill()` as Migration20261128221000AgentTry made it, with (up) or without (down) people's times. */
function backfill(withInbox: boolean): string {
  return `
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
        update analytics_conversations a set handed_off = exists (select 1 from conversation_events e where e.conversation_id = a.conversation_id and e.type = 'handoff');${
          withInbox ? '\n        select analytics_inbox_backfill();' : ''
        }
        delete from analytics_message_hours;
        insert into analytics_message_hours (workspace_id, hour, channel, direction, messages)
        select m.workspace_id, date_trunc('hour', m.created_at at time zone 'UTC') at time zone 'UTC', c.channel,
               case when m.role = 'user' then 'in' else 'out' end, count(*)
        from chat_messages m join conversations c on c.id = m.conversation_id
        where m.role <> 'tool' and not c.is_test
        group by 1, 2, 3, 4;
      $$`;
}
