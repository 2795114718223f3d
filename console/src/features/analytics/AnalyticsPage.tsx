import { useState, type FormEvent } from 'react';
import { BarChart, type Datum } from '../../components/Chart';
import { ErrorAlert, Loading } from '../../components/feedback';
import { NotAllowed, Page } from '../../components/Page';
import { Link, navigate, useSearch } from '../../lib/router';
import { hasScope, type Session } from '../auth/api';
import { useChannels, useHandling, useHourly, useOverTime, useSummary, type Range } from './api';

const DAY = 86_400_000;
/** The API's most buckets a series returns: hourly sums need a range of at most this many hours. */
const MAX_HOURLY = 2000;
const isoDay = (d: Date) => d.toISOString().slice(0, 10);
const DATE = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2})?)?$/;

/** The last `days` days up to today (UTC) included: `to` is exclusive, so tomorrow. */
function lastDays(days: number): { from: string; to: string } {
  const tomorrow = new Date(Date.parse(isoDay(new Date())) + DAY);
  return { from: isoDay(new Date(tomorrow.getTime() - days * DAY)), to: isoDay(tomorrow) };
}

/** The range from the query string (a shared link), else the last 30 days; the interval follows the range's length unless given. */
export function rangeOf(search: string): Range {
  const q = new URLSearchParams(search);
  const fallback = lastDays(30);
  const from = q.get('from') && DATE.test(q.get('from')!) ? q.get('from')! : fallback.from;
  const to = q.get('to') && DATE.test(q.get('to')!) ? q.get('to')! : fallback.to;
  const span = Date.parse(to) - Date.parse(from);
  const given = q.get('interval');
  const interval = given === 'hour' || given === 'day' || given === 'week' ? given : span <= 2 * DAY ? 'hour' : span <= 120 * DAY ? 'day' : 'week';
  return { from, to, interval, tz: q.get('tz') || 'UTC' };
}

const query = (r: Partial<Range>) => `/analytics?${new URLSearchParams(Object.entries(r).filter(([, v]) => v) as Array<[string, string]>).toString()}`;

const percent = (v: number | null) => (v === null ? '—' : `${Math.round(v * 1000) / 10} %`);
const count = (v: number) => new Intl.NumberFormat().format(v);

function duration(seconds: number | null): string {
  if (seconds === null) return '—';
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

/** Workspace analytics as charts, for a range the URL carries, so a view can be shared. */
export function AnalyticsPage({ session }: { session: Session }) {
  const search = useSearch();
  if (!hasScope(session, 'analytics:read')) return <NotAllowed title="Analytics" why="Your role does not read analytics." />;
  const range = rangeOf(search);
  // Keyed by the range: the form starts from what the URL says.
  return <Analytics key={`${range.from}|${range.to}|${range.interval}|${range.tz}`} range={range} />;
}

function Analytics({ range }: { range: Range }) {
  const [from, setFrom] = useState(range.from.slice(0, 10));
  const [to, setTo] = useState(range.to.slice(0, 10));
  const [interval, setPer] = useState(range.interval);
  const summary = useSummary(range);
  const overTime = useOverTime(range);
  const channels = useChannels(range);
  const handling = useHandling(range);
  const hours = (Date.parse(range.to) - Date.parse(range.from)) / 3_600_000;
  const hourly = useHourly(range, hours <= MAX_HOURLY);

  const apply = (e: FormEvent) => {
    e.preventDefault();
    navigate(query({ from, to, interval, tz: range.tz === 'UTC' ? undefined : range.tz }));
  };

  const label = (start: string) => (range.interval === 'hour' ? `${start.slice(5, 10)} ${start.slice(11, 13)}:00` : start.slice(0, 10));
  const series: Datum[] = overTime.data?.buckets.map((b) => ({ label: label(b.start), value: b.conversations })) ?? [];
  const byHour: Datum[] = Array.from({ length: 24 }, (_, h) => ({ label: `${String(h).padStart(2, '0')}:00`, value: 0 }));
  // Each bucket's start is written with the zone's offset: its hour is the hour of the day there.
  for (const b of hourly.data?.buckets ?? []) byHour[Number(b.start.slice(11, 13))].value += b.conversations;

  return (
    <Page title="Analytics">
      <form className="filters" onSubmit={apply} aria-label="Range">
        <label htmlFor="range-from">From</label>
        <input id="range-from" className="input" type="date" required value={from} onChange={(e) => setFrom(e.target.value)} />
        <label htmlFor="range-to">Until (not included)</label>
        <input id="range-to" className="input" type="date" required value={to} onChange={(e) => setTo(e.target.value)} />
        <label htmlFor="range-interval">Per</label>
        <select id="range-interval" className="select" value={interval} onChange={(e) => setPer(e.target.value as Range['interval'])}>
          <option value="hour">hour</option>
          <option value="day">day</option>
          <option value="week">week</option>
        </select>
        <button type="submit" className="button">
          Show
        </button>
      </form>
      <p className="muted">
        {range.from.slice(0, 10)} to {range.to.slice(0, 10)} (not included), {range.tz}. Quick ranges:{' '}
        <Link to={query(lastDays(7))}>last 7 days</Link>, <Link to={query(lastDays(30))}>last 30 days</Link>, <Link to={query(lastDays(90))}>last 90 days</Link>. The address
        holds the range: copy it to share this view.
      </p>

      {summary.isPending ? (
        <Loading what="the summary" />
      ) : summary.isError ? (
        <ErrorAlert error={summary.error} />
      ) : (
        <section aria-labelledby="summary-title">
          <h2 id="summary-title" className="visually-hidden">
            Summary
          </h2>
          <dl className="facts card">
            <div>
              <dt>Conversations</dt>
              <dd className="stat-value">{count(summary.data.conversations)}</dd>
            </div>
            <div>
              <dt>Resolved without a person</dt>
              <dd className="stat-value">{percent(summary.data.resolution_rate)}</dd>
            </div>
            <div>
              <dt>Handed to a person</dt>
              <dd className="stat-value">{percent(summary.data.handoff_rate)}</dd>
            </div>
            <div>
              <dt>Median first response</dt>
              <dd className="stat-value">{duration(summary.data.median_first_reply_seconds)}</dd>
            </div>
            <div>
              <dt>Messages in / out</dt>
              <dd className="stat-value">
                {count(summary.data.messages_in)} / {count(summary.data.messages_out)}
              </dd>
            </div>
            <div>
              <dt>Average rating</dt>
              <dd className="stat-value">{summary.data.feedback.average_rating === null ? '—' : `${summary.data.feedback.average_rating} / 5`}</dd>
            </div>
          </dl>
        </section>
      )}
      {handling.isPending ? (
        <Loading what="wait and handle times" />
      ) : handling.isError ? (
        <ErrorAlert error={handling.error} />
      ) : (
        <section className="section" aria-labelledby="handling-title">
          <h2 id="handling-title">People’s wait and handle times</h2>
          <dl className="facts card">
            <div>
              <dt>Taken by a person</dt>
              <dd className="stat-value">{count(handling.data.handled_conversations)}</dd>
            </div>
            <div>
              <dt>Median wait</dt>
              <dd className="stat-value">{duration(handling.data.median_wait_seconds)}</dd>
            </div>
            <div>
              <dt>Wait, 90th percentile</dt>
              <dd className="stat-value">{duration(handling.data.p90_wait_seconds)}</dd>
            </div>
            <div>
              <dt>Median handle time</dt>
              <dd className="stat-value">{duration(handling.data.median_handle_seconds)}</dd>
            </div>
            <div>
              <dt>Handle time, 90th percentile</dt>
              <dd className="stat-value">{duration(handling.data.p90_handle_seconds)}</dd>
            </div>
          </dl>
          <p className="hint">
            Per conversation started in the range that a person took: the wait is its time in the queue until someone took it, the handle time how long people held it (to hand back, close or
            re-queue), each summed over its times in the queue. Conversations someone holds now are not in the handle times yet.
          </p>
        </section>
      )}

      <div className="charts section">
        {overTime.isPending ? (
          <Loading what="conversations over time" />
        ) : overTime.isError ? (
          <ErrorAlert error={overTime.error} />
        ) : (
          <BarChart title={`Conversations per ${range.interval}`} unit="conversations" data={series} labelEvery={Math.max(1, Math.ceil(series.length / 8))} />
        )}
        {channels.isPending ? (
          <Loading what="channels" />
        ) : channels.isError ? (
          <ErrorAlert error={channels.error} />
        ) : (
          <BarChart title="Conversations by channel" unit="conversations" orientation="horizontal" format={count} data={channels.data.channels.map((c) => ({ label: c.channel, value: c.conversations }))} />
        )}
        {summary.data ? (
          <BarChart
            title="Resolution"
            unit="conversations"
            orientation="horizontal"
            format={count}
            data={[
              { label: 'Resolved without a person', value: summary.data.resolved_without_handoff },
              { label: 'Handed to a person', value: summary.data.handoffs },
              { label: 'Neither yet', value: Math.max(0, summary.data.conversations - summary.data.resolved_without_handoff - summary.data.handoffs) },
            ]}
          />
        ) : null}
        {hours > MAX_HOURLY ? (
          <p className="notice">Busiest hours need a range of at most {Math.floor(MAX_HOURLY / 24)} days.</p>
        ) : hourly.isPending ? (
          <Loading what="busiest hours" />
        ) : hourly.isError ? (
          <ErrorAlert error={hourly.error} />
        ) : (
          <BarChart title={`Busiest hours (${range.tz})`} unit="conversations" data={byHour} labelEvery={3} />
        )}
        {summary.data ? (
          <BarChart
            title="Visitors’ ratings"
            unit="ratings"
            orientation="horizontal"
            format={count}
            data={[
              { label: 'Replies rated up', value: summary.data.feedback.up },
              { label: 'Replies rated down', value: summary.data.feedback.down },
              { label: 'Conversations rated', value: summary.data.feedback.ratings },
            ]}
            note={summary.data.feedback.average_rating === null ? 'No conversation rated in this range.' : `Conversations rated ${summary.data.feedback.average_rating} out of 5 on average.`}
          />
        ) : null}
      </div>
    </Page>
  );
}
