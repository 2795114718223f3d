/** Runs one SQL statement with `?` parameters (e.g. an EntityManager's connection execute). */
export type Sql = (query: string, params?: unknown[]) => Promise<unknown>;

/**
 * Conversations at scale for the analytics queries: per workspace `n` conversations spread over 90 days (web, msgapp,
 * voice in turn), ten transcript messages each (user / assistant, replies 2–30 s later), 5 % handed over (taken by a
 * person and handed back). Loaded in bulk with the analytics triggers off, then the migration's backfill, as after an
 * upgrade; then vacuum analyze.
 */
export async function seedConversations(sql: Sql, workspaces: Array<{ id: string; conversations: number }>): Promise<void> {
  await sql(`alter table chat_messages disable trigger chat_messages_analytics`);
  await sql(`alter table conversation_events disable trigger conversation_events_analytics`);
  for (const { id: workspace, conversations: n } of workspaces) {
    await sql(
      `insert into conversations (id, workspace_id, channel, status, created_at, updated_at)
       select 'conv_' || lpad(to_hex(g), 24, '0') || ?, ?, (array['web','msgapp','voice'])[1 + g % 3], 'open',
              now() - make_interval(secs => (g * 7919 % (90 * 86400))), now()
       from generate_series(1, ?) g`,
      [workspace.slice(-4), workspace, n],
    );
    await sql(
      `insert into chat_messages (id, workspace_id, conversation_id, role, text, created_at)
       select 'msg_' || lpad(to_hex(c.n * 10 + k), 24, '0') || ?, c.workspace_id, c.id, case when k % 2 = 0 then 'user' else 'assistant' end, 'x',
              c.created_at + make_interval(secs => k * 20 + (case when k % 2 = 1 then (c.n % 29) + 2 else 0 end))
       from (select id, workspace_id, created_at, row_number() over () as n from conversations where workspace_id = ?) c, generate_series(0, 9) k`,
      [workspace.slice(-4), workspace],
    );
    await sql(
      `insert into conversation_events (id, conversation_id, type, data)
       select 'evt_' || substr(id, 6), id, 'handoff', '{}' from conversations where workspace_id = ? and abs(hashtext(id)) % 20 = 0`,
      [workspace],
    );
    // A person takes each handed-over conversation (waits of 0–10 min) and hands it back (held 1–30 min), as the inbox records it.
    await sql(
      `insert into conversation_events (id, conversation_id, type, data, created_at)
       select 'evt_' || substr(c.id, 6) || e.k, c.id, e.kind, e.payload, c.created_at + make_interval(secs => e.after_s)
       from conversations c, lateral (values
         ('a', 'inbox.assigned', jsonb_build_object('how', 'take', 'wait_ms', abs(hashtext(c.id)) % 600000), 600),
         ('b', 'inbox.handed_back', jsonb_build_object('handle_ms', 60000 + abs(hashtext(c.id || 'h')) % 1740000), 2400)) e(k, kind, payload, after_s)
       where c.workspace_id = ? and abs(hashtext(c.id)) % 20 = 0`,
      [workspace],
    );
  }
  await sql('select analytics_backfill()');
  await sql(`alter table chat_messages enable trigger chat_messages_analytics`);
  await sql(`alter table conversation_events enable trigger conversation_events_analytics`);
  await sql('vacuum analyze');
}
