// What this measures and how to read it: docs/benchmarks.md#analytics
import { AnalyticsService, windowOf } from '../domain/analytics/analytics';
import { FeedbackService } from '../domain/widget/feedback';
import { ChatTranscript } from '../domain/chat/transcript';
import { seedConversations } from '../dev/fakes/analytics-data';
import { section, type Cleanup } from './lib/child';
import { envInt } from './lib/load';
import { setUpBench } from './lib/setup';
import { below, now, percentile, round1, runStats, summarizeTarget, timeEach } from './lib/stats';
import type { Check, Result, RunStats } from './lib/types';

const GOAL_P50_MS = 50;

async function measure(log: (line: string) => void, cleanup: Cleanup): Promise<Result> {
  const conversations = envInt('BENCH_ANALYTICS_CONVERSATIONS', 100_000, 100);
  const samples = envInt('BENCH_ANALYTICS_SAMPLES', 30, 3);
  const bench = await setUpBench(cleanup);
  const em = bench.db.orm.em.fork();
  const sql = (q: string, p: unknown[] = []) => em.getConnection().execute(q, p);
  const ws = bench.workspaceId;
  const noise = 'ws_benchnoise000000000000000';
  await sql(`insert into workspaces (id, name) values (?, 'noise')`, [noise]);

  const t0 = now();
  await seedConversations(sql, [{ id: ws, conversations }, { id: noise, conversations: Math.round(conversations / 10) }]);
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
    ['handling (people\'s wait and handle times), 90 days', () => analytics.handling(ws, all)],
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
  const checks: Check[] = ['summary, 90 days', 'conversations-over-time, 90 days by day, Europe/Berlin'].map((name) => below(`analytics ${name} p50`, round1(p50.get(name)!), 'ms', GOAL_P50_MS));
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
