import type { EntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../errors';
import { ChatTranscript } from '../chat/transcript';
import type { FeedbackCounts } from '../widget/feedback';

/**
 * Workspace analytics, exact (no sampling), computed with SQL aggregates over what
 * triggers keep as rows are written (Migration20261125174000AnalyticsRollups: each
 * conversation's first message and reply, answered, handed over; messages per UTC hour):
 * conversations by their start, messages by the transcript (`chat_messages`, every channel: the customer's messages are `in`, the
 * agent's and human agents' replies `out`), handoffs by the conversation's timeline.
 * Windows are half-open, `[from, to)`; the default is the last 30 days.
 *
 * Definitions (docs/analytics-billing-support.md repeats them):
 * - `conversations`: conversations started in the window;
 * - `handoffs`: those of them a human was asked to take (a `handoff` on their timeline);
 * - `resolved_without_handoff`: those the agent answered at least once and never handed over;
 * - `median_first_reply_seconds`: per conversation started in the window, from its first
 *   customer message to the first reply after it (agent or human), the median; null when none;
 * - `feedback`: widget visitors' thumbs (`up`, `down`) and conversation ratings (`ratings`,
 *   `average_rating` of their 1-to-5 scores, null when none) first given in the window, as they stand now.
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

const bad = (message: string) => new DomainError('invalid_request', message);

/** The instants a window may reach: years 1 to 9999, as every stored time lies there (and PostgreSQL has no year 0). */
const EARLIEST = Date.parse('0001-01-01T00:00:00Z');
const LATEST = Date.parse('9999-12-31T23:59:59.999Z');

/** `from`/`to` as given (an RFC 3339 date-time or date, clamped to years 1 to 9999), or the last 30 days; checked. */
export function windowOf(q: { from?: string; to?: string }, now = new Date()): Window {
  const parse = (name: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    const d = new Date(v);
    if (!/^\d{4}-\d{2}-\d{2}/.test(v) || Number.isNaN(d.getTime())) throw bad(`${name}: an ISO 8601 date or date-time`);
    return new Date(Math.min(LATEST, Math.max(EARLIEST, d.getTime())));
  };
  const to = parse('to', q.to) ?? now;
  const from = parse('from', q.from) ?? new Date(to.getTime() - DEFAULT_DAYS * 86_400_000);
  if (from >= to) throw bad('from: must be before to');
  if (to.getTime() - from.getTime() > MAX_DAYS * 86_400_000) throw bad(`from, to: a window of at most ${MAX_DAYS} days`);
  return { from, to };
}

export class AnalyticsService {
  constructor(
    private readonly em: EntityManager,
    /** widget_feedback's owner counts it (domain/widget/feedback.ts). */
    private readonly feedback: { counts(workspaceId: string, w: Window): Promise<FeedbackCounts> },
    /** chat_messages' owner counts a window's messages (its partial hours). Default: a transcript on `em` (benches build the service on its own). */
    private readonly transcript: Pick<ChatTranscript, 'messageCounts'> = new ChatTranscript(em),
  ) {}

  private sql<T>(query: string, params: unknown[]): Promise<T[]> {
    // raw SQL: aggregates over a window (filters, percentile_cont, generate_series with a time zone) have no ORM form.
    // eslint-disable-next-line no-restricted-syntax
    return this.em.fork().getConnection().execute<T[]>(query, params);
  }

  /**
   * Transcript messages in the window, by direction and channel: the window's full UTC
   * hours from `analytics_message_hours`, its partial first and last hours from the
   * messages themselves (a window inside one hour: the messages only). Exact.
   */
  private async messageCounts(workspaceId: string, w: Window): Promise<Array<{ channel: string; direction: 'in' | 'out'; n: number }>> {
    const HOUR = 3_600_000;
    const h0 = new Date(Math.ceil(w.from.getTime() / HOUR) * HOUR);
    const h1 = new Date(Math.floor(w.to.getTime() / HOUR) * HOUR);
    const fromMessages = (from: Date, to: Date) => this.transcript.messageCounts(workspaceId, from, to);
    const parts =
      h0 >= h1
        ? [await fromMessages(w.from, w.to)]
        : await Promise.all([
            this.sql<{ channel: string; direction: 'in' | 'out'; n: string }>(
              `select channel, direction, sum(messages) as n from analytics_message_hours where workspace_id = ? and hour >= ? and hour < ? group by 1, 2`,
              [workspaceId, h0, h1],
            ),
            w.from < h0 ? fromMessages(w.from, h0) : [],
            h1 < w.to ? fromMessages(h1, w.to) : [],
          ]);
    const sum = new Map<string, { channel: string; direction: 'in' | 'out'; n: number }>();
    for (const r of parts.flat()) {
      const k = `${r.channel}/${r.direction}`;
      sum.set(k, { channel: r.channel, direction: r.direction, n: (sum.get(k)?.n ?? 0) + Number(r.n) });
    }
    return [...sum.values()];
  }

  async summary(workspaceId: string, w: Window) {
    const [[row], messages, feedback] = await Promise.all([
      // The conversations of the window, from analytics_conversations' covering index (kept by triggers).
      this.sql<{ conversations: string; handoffs: string; resolved: string; median_first_reply: number | null }>(
        `select count(*) as conversations,
                count(*) filter (where handed_off) as handoffs,
                count(*) filter (where answered and not handed_off) as resolved,
                percentile_cont(0.5) within group (order by extract(epoch from (first_reply_at - first_in_at))) filter (where first_reply_at is not null) as median_first_reply
         from analytics_conversations where workspace_id = ? and created_at >= ? and created_at < ?`,
        [workspaceId, w.from, w.to],
      ),
      this.messageCounts(workspaceId, w),
      this.feedback.counts(workspaceId, w),
    ]);
    const conversations = Number(row.conversations);
    const handoffs = Number(row.handoffs);
    const resolved = Number(row.resolved);
    const rate = (n: number) => (conversations ? Math.round((n / conversations) * 10_000) / 10_000 : null);
    const total = (d: 'in' | 'out') => messages.filter((m) => m.direction === d).reduce((a, m) => a + m.n, 0);
    return {
      from: w.from.toISOString(),
      to: w.to.toISOString(),
      conversations,
      messages_in: total('in'),
      messages_out: total('out'),
      handoffs,
      handoff_rate: rate(handoffs),
      resolved_without_handoff: resolved,
      resolution_rate: rate(resolved),
      median_first_reply_seconds: row.median_first_reply === null ? null : Math.round(Number(row.median_first_reply) * 1000) / 1000,
      feedback,
    };
  }

  /**
   * People's part in the conversations started in the window (the console's analytics page; not in the contract's
   * /api/v1): how many a person took (`handled_conversations`), and per such conversation its wait in the queue
   * before a person took it and the time people held it, each summed over its stays in the queue
   * (Migration20261128233000InboxTimes), as the median and 90th percentile in seconds; null when none. A conversation
   * a person holds now is left out of the handle times (not final yet), not of the waits.
   */
  async handling(workspaceId: string, w: Window) {
    // From analytics_conversations' (workspace_id, created_at) index; only the window's rows are read.
    const [row] = await this.sql<{ handled: string; wait50: number | null; wait90: number | null; handle50: number | null; handle90: number | null }>(
      `select count(*) as handled,
              percentile_cont(0.5) within group (order by human_wait_ms) as wait50,
              percentile_cont(0.9) within group (order by human_wait_ms) as wait90,
              percentile_cont(0.5) within group (order by human_handle_ms) filter (where not human_held) as handle50,
              percentile_cont(0.9) within group (order by human_handle_ms) filter (where not human_held) as handle90
       from analytics_conversations where workspace_id = ? and created_at >= ? and created_at < ? and human_assignments > 0`,
      [workspaceId, w.from, w.to],
    );
    const seconds = (ms: number | null) => (ms === null ? null : Math.round(Number(ms)) / 1000);
    return {
      from: w.from.toISOString(),
      to: w.to.toISOString(),
      handled_conversations: Number(row.handled),
      median_wait_seconds: seconds(row.wait50),
      p90_wait_seconds: seconds(row.wait90),
      median_handle_seconds: seconds(row.handle50),
      p90_handle_seconds: seconds(row.handle90),
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
    // The window's whole 15-minute slots [s0, s1); a window inside one slot has none (s1 <= s0: the rows count it all).
    const SLOT = 15 * 60_000;
    const s0 = new Date(Math.ceil(w.from.getTime() / SLOT) * SLOT);
    const s1 = new Date(Math.max(s0.getTime(), Math.floor(w.to.getTime() / SLOT) * SLOT));
    // Each bucket's start as epoch milliseconds: a timestamptz read back as text names years below 100 and local-mean-time
    // offsets with seconds (Europe/Berlin before 1893: +00:53:28), which Date cannot parse.
    const rows = await this.sql<{ start_ms: string; conversations: string }>(
      `with series as (
         select generate_series(date_trunc(?, ?::timestamptz at time zone ?), date_trunc(?, (?::timestamptz - interval '1 microsecond') at time zone ?), ('1 ' || ?)::interval) as local_start
       ),
       -- Conversations per 15-minute UTC slot (every zone's offset and change is a multiple of 15 minutes): the
       -- window's whole slots from the rollup a trigger keeps, its partial first and last slots from the rows.
       slots as (
         select slot, conversations as n from analytics_conversation_slots
          where workspace_id = ? and slot >= ? and slot < ?
         union all
         select date_bin('15 minutes', c.created_at, timestamptz '2000-01-01 00:00:00+00'), 1 from analytics_conversations c
          where c.workspace_id = ? and c.created_at >= ? and c.created_at < ? and (c.created_at < ? or c.created_at >= ?)
       ),
       counts as (
         select date_trunc(?, slot at time zone ?) as local_start, sum(n) as n from slots group by 1
       )
       select extract(epoch from s.local_start at time zone ?) * 1000 as start_ms, coalesce(k.n, 0) as conversations
       from series s left join counts k using (local_start)
       order by s.local_start`,
      [interval, w.from, tz, interval, w.to, tz, interval, workspaceId, s0, s1, workspaceId, w.from, w.to, s0, s1, interval, tz, tz],
    );
    return {
      from: w.from.toISOString(),
      to: w.to.toISOString(),
      interval,
      tz,
      buckets: rows.map((r) => ({ start: zoned(new Date(Number(r.start_ms)), tz), conversations: Number(r.conversations) })),
    };
  }

  /** Conversations started and messages written in the window, per channel (every channel listed, zeros too). */
  async channelBreakdown(workspaceId: string, w: Window) {
    const [convs, messages] = await Promise.all([
      this.sql<{ channel: string; n: string }>(`select channel, count(*) as n from analytics_conversations where workspace_id = ? and created_at >= ? and created_at < ? group by 1`, [workspaceId, w.from, w.to]),
      this.messageCounts(workspaceId, w),
    ]);
    const conversations = new Map(convs.map((r) => [r.channel, Number(r.n)]));
    return {
      from: w.from.toISOString(),
      to: w.to.toISOString(),
      channels: CHANNELS.map((channel) => ({
        channel,
        conversations: conversations.get(channel) ?? 0,
        messages: messages.filter((m) => m.channel === channel).reduce((a, m) => a + m.n, 0),
      })),
    };
  }
}

/**
 * An instant as an ISO date-time with the zone's offset, e.g. 2026-03-29T00:00:00+01:00, the
 * year in four digits (0020, not 20). An offset with seconds (local mean time, before a zone
 * adopted standard time) is rounded to the minute, as RFC 3339 offsets have none, and the
 * local time shown is the instant plus that offset: the string names the instant exactly.
 */
export function zoned(d: Date, tz: string): string {
  const name = new Intl.DateTimeFormat('en-US', { timeZone: tz, timeZoneName: 'longOffset' }).formatToParts(d).find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const m = /^GMT(?:([+-])(\d{1,2}):(\d{2})(?::(\d{2}))?)?$/.exec(name);
  const seconds = m?.[1] ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 3600 + Number(m[3]) * 60 + Number(m[4] ?? 0)) : 0;
  const offset = Math.round(seconds / 60);
  const local = new Date(d.getTime() + offset * 60_000);
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  const sign = offset < 0 ? '-' : '+';
  return (
    `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}` +
    `T${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}${sign}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`
  );
}
