import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../errors';

/**
 * Workspace analytics, computed from the rows themselves with SQL aggregates (no
 * sampling, no pre-aggregation): conversations by their start, messages by the
 * transcript (`chat_messages`, every channel: the customer's messages are `in`, the
 * agent's and human agents' replies `out`), handoffs by the conversation's timeline.
 * Windows are half-open, `[from, to)`; the default is the last 30 days.
 *
 * Definitions (the README repeats them):
 * - `conversations`: conversations started in the window;
 * - `handoffs`: those of them a human was asked to take (a `handoff` on their timeline);
 * - `resolved_without_handoff`: those the agent answered at least once and never handed over;
 * - `median_first_reply_seconds`: per conversation started in the window, from its first
 *   customer message to the first reply after it (agent or human), the median; null when none.
 */

export interface Window {
  from: Date;
  to: Date;
}

export type Interval = 'hour' | 'day' | 'week';
export const CHANNELS = ['msgapp', 'web', 'voice'] as const;

const DEFAULT_DAYS = 30;
/** Longest window, and most buckets a time series returns. */
const MAX_DAYS = 400;
const MAX_BUCKETS = 2000;
const HOURS = { hour: 1, day: 24, week: 24 * 7 } as const;

const bad = (message: string) => new ApiError(400, 'invalid_request', message);

/** `from`/`to` as given (ISO 8601), or the last 30 days; checked. */
export function windowOf(q: { from?: string; to?: string }, now = new Date()): Window {
  const parse = (name: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    const d = new Date(v);
    if (!/^\d{4}-\d{2}-\d{2}/.test(v) || Number.isNaN(d.getTime())) throw bad(`${name}: an ISO 8601 date or date-time`);
    return d;
  };
  const to = parse('to', q.to) ?? now;
  const from = parse('from', q.from) ?? new Date(to.getTime() - DEFAULT_DAYS * 86_400_000);
  if (from >= to) throw bad('from: must be before to');
  if (to.getTime() - from.getTime() > MAX_DAYS * 86_400_000) throw bad(`from, to: a window of at most ${MAX_DAYS} days`);
  return { from, to };
}

export class AnalyticsService {
  constructor(private readonly em: EntityManager) {}

  private sql<T>(query: string, params: unknown[]): Promise<T[]> {
    // raw SQL: aggregates over a window (filters, percentile_cont, generate_series with a time zone) have no ORM form.
    // eslint-disable-next-line no-restricted-syntax
    return this.em.fork().getConnection().execute<T[]>(query, params);
  }

  async summary(workspaceId: string, w: Window) {
    const [row] = await this.sql<{
      conversations: string;
      handoffs: string;
      resolved: string;
      messages_in: string;
      messages_out: string;
      median_first_reply: number | null;
    }>(
      `with convs as (
         select c.id,
                exists (select 1 from conversation_events e where e.conversation_id = c.id and e.type = 'handoff') as handed_off
         from conversations c
         where c.workspace_id = ? and c.created_at >= ? and c.created_at < ?
       ),
       firsts as (
         select cv.id, cv.handed_off,
                (select min(m.created_at) from chat_messages m where m.conversation_id = cv.id and m.role = 'user') as first_in
         from convs cv
       ),
       replies as (
         select f.id, f.handed_off, f.first_in,
                (select min(m.created_at) from chat_messages m
                  where m.conversation_id = f.id and m.role in ('assistant', 'human') and f.first_in is not null and m.created_at > f.first_in) as first_out
         from firsts f
       )
       select
         (select count(*) from replies) as conversations,
         (select count(*) from replies where handed_off) as handoffs,
         (select count(*) from replies r where not r.handed_off
            and exists (select 1 from chat_messages m where m.conversation_id = r.id and m.role = 'assistant')) as resolved,
         (select count(*) from chat_messages m where m.workspace_id = ? and m.created_at >= ? and m.created_at < ? and m.role = 'user') as messages_in,
         (select count(*) from chat_messages m where m.workspace_id = ? and m.created_at >= ? and m.created_at < ? and m.role in ('assistant', 'human')) as messages_out,
         (select percentile_cont(0.5) within group (order by extract(epoch from (first_out - first_in))) from replies where first_out is not null) as median_first_reply`,
      [workspaceId, w.from, w.to, workspaceId, w.from, w.to, workspaceId, w.from, w.to],
    );
    const conversations = Number(row.conversations);
    const handoffs = Number(row.handoffs);
    const resolved = Number(row.resolved);
    const rate = (n: number) => (conversations ? Math.round((n / conversations) * 10_000) / 10_000 : null);
    return {
      from: w.from.toISOString(),
      to: w.to.toISOString(),
      conversations,
      messages_in: Number(row.messages_in),
      messages_out: Number(row.messages_out),
      handoffs,
      handoff_rate: rate(handoffs),
      resolved_without_handoff: resolved,
      resolution_rate: rate(resolved),
      median_first_reply_seconds: row.median_first_reply === null ? null : Math.round(Number(row.median_first_reply) * 1000) / 1000,
    };
  }

  /**
   * Conversations started per hour, day or week of the window, in time zone `tz` (IANA),
   * every bucket present (zeros too). A bucket is named by its start, as an ISO date-time
   * with the zone's offset; days and weeks (Monday first) follow the zone's midnight.
   */
  async conversationsOverTime(workspaceId: string, w: Window, interval: Interval, tz: string) {
    const [known] = await this.sql<{ n: string }>(`select count(*) as n from pg_timezone_names where name = ?`, [tz]);
    if (!Number(known.n)) throw bad(`tz: '${tz.slice(0, 60)}' is not an IANA time zone`);
    const buckets = (w.to.getTime() - w.from.getTime()) / 3_600_000 / HOURS[interval];
    if (buckets > MAX_BUCKETS) throw bad(`interval: ${Math.ceil(buckets)} ${interval}s in the window; at most ${MAX_BUCKETS} (choose a larger interval or a shorter window)`);
    const rows = await this.sql<{ start: Date; conversations: string }>(
      `with series as (
         select generate_series(date_trunc(?, ?::timestamptz at time zone ?), date_trunc(?, (?::timestamptz - interval '1 microsecond') at time zone ?), ('1 ' || ?)::interval) as local_start
       ),
       counts as (
         select date_trunc(?, c.created_at at time zone ?) as local_start, count(*) as n
         from conversations c
         where c.workspace_id = ? and c.created_at >= ? and c.created_at < ?
         group by 1
       )
       select s.local_start at time zone ? as start, coalesce(k.n, 0) as conversations
       from series s left join counts k using (local_start)
       order by s.local_start`,
      [interval, w.from, tz, interval, w.to, tz, interval, interval, tz, workspaceId, w.from, w.to, tz],
    );
    return {
      from: w.from.toISOString(),
      to: w.to.toISOString(),
      interval,
      tz,
      buckets: rows.map((r) => ({ start: zoned(new Date(r.start), tz), conversations: Number(r.conversations) })),
    };
  }

  /** Conversations started and messages written in the window, per channel (every channel listed, zeros too). */
  async channelBreakdown(workspaceId: string, w: Window) {
    const rows = await this.sql<{ channel: string; conversations: string; messages: string }>(
      `select ch.channel,
              (select count(*) from conversations c where c.workspace_id = ? and c.channel = ch.channel and c.created_at >= ? and c.created_at < ?) as conversations,
              (select count(*) from chat_messages m join conversations c on c.id = m.conversation_id
                where m.workspace_id = ? and c.channel = ch.channel and m.role <> 'tool' and m.created_at >= ? and m.created_at < ?) as messages
       from (values ${CHANNELS.map(() => '(?)').join(', ')}) as ch(channel)`,
      [workspaceId, w.from, w.to, workspaceId, w.from, w.to, ...CHANNELS],
    );
    const by = new Map(rows.map((r) => [r.channel, r]));
    return {
      from: w.from.toISOString(),
      to: w.to.toISOString(),
      channels: CHANNELS.map((channel) => ({ channel, conversations: Number(by.get(channel)?.conversations ?? 0), messages: Number(by.get(channel)?.messages ?? 0) })),
    };
  }
}

/** An instant as an ISO date-time with the zone's offset, e.g. 2026-03-29T00:00:00+01:00. */
export function zoned(d: Date, tz: string): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-CA', { timeZone: tz, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' })
      .formatToParts(d)
      .map((p) => [p.type, p.value]),
  );
  const local = Date.UTC(+parts.year, +parts.month - 1, +parts.day, +parts.hour, +parts.minute, +parts.second);
  const offset = Math.round((local - Math.floor(d.getTime() / 1000) * 1000) / 60_000);
  const sign = offset < 0 ? '-' : '+';
  const hh = String(Math.floor(Math.abs(offset) / 60)).padStart(2, '0');
  const mm = String(Math.abs(offset) % 60).padStart(2, '0');
  return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}:${parts.second}${sign}${hh}:${mm}`;
}
