// The analytics section: the three analytics queries at scale, one workspace holding
// BENCH_ANALYTICS_CONVERSATIONS (100k) conversations over 90 days and ten transcript
// messages each (1M), another workspace with a tenth of that as noise; every figure from
// AnalyticsService, i.e. the SQL the API runs (HTTP adds the same small constant to all).
// Baseline, in the same run: the cheapest query over the same rows (an index-only count of
// the window's messages). Checks: summary and conversations-over-time p50 < 50 ms.
//
// BENCH_ANALYTICS_CONVERSATIONS (100000), BENCH_ANALYTICS_SAMPLES (30).
import { AnalyticsService, windowOf } from '../domain/analytics/analytics';
import { FeedbackService } from '../domain/widget/feedback';
import { ChatTranscript } from '../domain/chat/transcript';
import { section, type Cleanup } from './lib/child';
import { envNumber } from './lib/load';
import { setUpBench } from './lib/setup';
import { now, percentile, runStats, summarizeTarget, timeEach } from './lib/stats';
import type { Check, Result, RunStats } from './lib/types';

const GOAL_P50_MS = 50;

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const conversations = Math.round(envNumber('BENCH_ANALYTICS_CONVERSATIONS', 100_000, 100));
  const samples = Math.round(envNumber('BENCH_ANALYTICS_SAMPLES', 30, 3));
  const bench = await setUpBench(cleanup);
  const em = bench.db.orm.em.fork();
  const sql = (q: string, p: unknown[] = []) => em.getConnection().execute(q, p);
  const ws = bench.workspaceId;
  const noise = 'ws_benchnoise000000000000000';
  await sql(`insert into workspaces (id, name) values (?, 'noise')`, [noise]);

  // ---- Seed with the analytics triggers off (a bulk load), then the migration's backfill, as after an upgrade.
  await sql(`alter table chat_messages disable trigger chat_messages_analytics`);
  await sql(`alter table conversation_events disable trigger conversation_events_analytics`);
  // ---- Seed: conversations spread over 90 days, ten messages each (user/assistant, replies 2-30 s later), 5 % handed over.
  const t0 = now();
  const seed = async (workspace: string, n: number) => {
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
  };
  await seed(ws, conversations);
  await seed(noise, Math.round(conversations / 10));
  await sql('select analytics_backfill()');
  await sql(`alter table chat_messages enable trigger chat_messages_analytics`);
  await sql(`alter table conversation_events enable trigger conversation_events_analytics`);
  await sql('vacuum analyze');
  const [{ n: messages }] = (await sql(`select count(*)::int as n from chat_messages where workspace_id = ?`, [ws])) as Array<{ n: number }>;
  log(`  seeded ${conversations} conversations and ${messages} messages in one workspace (+10 % in another) in ${((now() - t0) / 1000).toFixed(1)} s`);

  const analytics = new AnalyticsService(bench.db.orm.em, new FeedbackService(bench.db.orm.em, new ChatTranscript(bench.db.orm.em)));
  const all = windowOf({ from: new Date(Date.now() - 91 * 86_400_000).toISOString(), to: new Date(Date.now() + 60_000).toISOString() });
  const month = windowOf({});
  const targets: Array<[string, () => Promise<unknown>]> = [
    ['baseline: count of the window\'s messages', () => sql(`select count(*) from chat_messages where workspace_id = ? and created_at >= ? and created_at < ?`, [ws, all.from, all.to])],
    ['summary, 90 days', () => analytics.summary(ws, all)],
    ['summary, 30 days', () => analytics.summary(ws, month)],
    ['conversations-over-time, 90 days by day, Europe/Berlin', () => analytics.conversationsOverTime(ws, all, 'day', 'Europe/Berlin')],
    ['conversations-over-time, 30 days by hour', () => analytics.conversationsOverTime(ws, month, 'hour', 'UTC')],
    ['channel-breakdown, 90 days', () => analytics.channelBreakdown(ws, all)],
  ];
  const runs: RunStats[] = [];
  const p50 = new Map<string, number>();
  for (const [name, run] of targets) {
    await run(); // warm
    const started = now();
    const lat = await timeEach(samples, run);
    runs.push(runStats(name, 1, (now() - started) / 1000, samples, lat, 1, { ok: samples }));
    p50.set(name, percentile(lat, 50));
    log(`  ${name}: p50 ${percentile(lat, 50).toFixed(1)} ms, p99 ${percentile(lat, 99).toFixed(1)} ms`);
  }
  const base = p50.get(targets[0][0])!;
  const checks: Check[] = ['summary, 90 days', 'conversations-over-time, 90 days by day, Europe/Berlin'].map((name) => ({
    name: `analytics ${name} p50`,
    value: Math.round(p50.get(name)! * 10) / 10,
    unit: 'ms',
    goal: `< ${GOAL_P50_MS}`,
    pass: p50.get(name)! < GOAL_P50_MS,
  }));
  const headlines = targets.slice(1).map(([name]) => `analytics ${name}: p50 ${p50.get(name)!.toFixed(1)} ms = ${(p50.get(name)! / base).toFixed(1)}× the baseline count (${base.toFixed(1)} ms)`);
  return {
    section: 'analytics',
    description: `AnalyticsService over ${conversations} conversations and ${messages} transcript messages in one workspace (90 days), sequential queries; baseline: an index-only count of the same window's messages`,
    settings: { conversations, messages, samples },
    runs,
    targets: targets.map(([name]) => summarizeTarget(runs, name)),
    checks,
    headlines,
  };
}

export const benchAnalytics = section(module, 'analytics', measure);
