import { Migration } from '@mikro-orm/migrations';

/**
 * The analytics rollups' counters in shards (issue 33). `analytics_message_hours` and `analytics_conversation_slots`
 * had one row per workspace and hour (or 15-minute slot), upserted by a trigger in the writing transaction: every
 * transaction that stored a transcript message or opened a conversation in a workspace held that one row's lock until
 * it committed, so a workspace's inbound messages (recorded in the msgapp webhook's own transaction) waited for each
 * other — measured in bench `msgapp-inbound`, most backends waiting on those rows' locks. Each counter is now 16 rows,
 * `shard` chosen by the writing connection (`pg_backend_pid() % 16`): concurrent transactions are on different
 * connections, so they seldom share a row; readers add the shards up (they already summed by key). The counts stay exact.
 */
/** The triggers' functions, with the counters' shard (up) or without it (down): the rest as Migration20261128221000AgentTry left them. */
function chatMessageFunction(sharded: boolean): string {
  const shard = (list: string, value: string) => (sharded ? `${list}, ${value}` : list);
  return `
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
        insert into analytics_message_hours as h (${shard('workspace_id, hour, channel, direction', 'shard')}, messages)
        values (msg.workspace_id, date_trunc('hour', msg.created_at at time zone 'UTC') at time zone 'UTC', ch,
                ${shard("case when msg.role = 'user' then 'in' else 'out' end", 'analytics_shard()')}, case when tg_op = 'DELETE' then -1 else 1 end)
        on conflict (${shard('workspace_id, hour, channel, direction', 'shard')}) do update set messages = h.messages + excluded.messages;
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
      end $$`;
}

function conversationSlotFunction(sharded: boolean): string {
  const shard = (list: string, value: string) => (sharded ? `${list}, ${value}` : list);
  return `
      create or replace function analytics_conversation_slot() returns trigger language plpgsql as $$
      declare
        r analytics_conversations;
      begin
        r := case when tg_op = 'DELETE' then old else new end;
        insert into analytics_conversation_slots as s (${shard('workspace_id, slot', 'shard')}, conversations)
        values (${shard("r.workspace_id, date_bin('15 minutes', r.created_at, timestamptz '2000-01-01 00:00:00+00')", 'analytics_shard()')}, case when tg_op = 'DELETE' then -1 else 1 end)
        on conflict (${shard('workspace_id, slot', 'shard')}) do update set conversations = s.conversations + excluded.conversations;
        return null;
      exception when foreign_key_violation then
        return null; -- the workspace is being deleted with everything in it
      end $$`;
}

export class Migration20261129120000AnalyticsShards extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table analytics_message_hours add column shard smallint not null default 0');
    this.addSql('alter table analytics_message_hours drop constraint analytics_message_hours_pkey');
    this.addSql('alter table analytics_message_hours add primary key (workspace_id, hour, channel, direction, shard)');
    this.addSql('alter table analytics_conversation_slots add column shard smallint not null default 0');
    this.addSql('alter table analytics_conversation_slots drop constraint analytics_conversation_slots_pkey');
    this.addSql('alter table analytics_conversation_slots add primary key (workspace_id, slot, shard)');
    this.addSql(`create function analytics_shard() returns smallint language sql volatile as $$ select (pg_backend_pid() % 16)::smallint $$`);
    this.addSql(chatMessageFunction(true));
    this.addSql(conversationSlotFunction(true));
  }

  override async down(): Promise<void> {
    // Back to one row per key: the shards summed first.
    this.addSql(conversationSlotFunction(false));
    this.addSql(chatMessageFunction(false));
    this.addSql('drop function analytics_shard()');
    for (const [table, key] of [
      ['analytics_message_hours', 'workspace_id, hour, channel, direction'],
      ['analytics_conversation_slots', 'workspace_id, slot'],
    ]) {
      const sum = table === 'analytics_message_hours' ? 'messages' : 'conversations';
      this.addSql(`create temporary table ${table}_sum as select ${key}, sum(${sum}) as ${sum} from ${table} group by ${key}`);
      this.addSql(`delete from ${table}`);
      this.addSql(`alter table ${table} drop constraint ${table}_pkey`);
      this.addSql(`alter table ${table} drop column shard`);
      this.addSql(`insert into ${table} (${key}, ${sum}) select ${key}, ${sum} from ${table}_sum`);
      this.addSql(`alter table ${table} add primary key (${key})`);
      this.addSql(`drop table ${table}_sum`);
    }
  }
}
