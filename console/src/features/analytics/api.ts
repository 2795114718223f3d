import { useQuery } from '@tanstack/react-query';
import type { operations } from '../../api/schema';
import { api, call } from '../../lib/api';

/** A zone the document lists (the server also takes the old aliases, which the URL may carry: the server judges). */
type Zone = NonNullable<NonNullable<operations['getConversationsOverTime']['parameters']['query']>['tz']>;

/** The range a view shows, as the URL carries it (the API's own parameters: `to` is exclusive). */
export interface Range {
  from: string;
  to: string;
  interval: 'hour' | 'day' | 'week';
  tz: string;
}

const windowOf = (r: Range) => ({ from: r.from, to: r.to });

export function useSummary(r: Range) {
  return useQuery({ queryKey: ['v1', 'analytics', 'summary', windowOf(r)], queryFn: () => call(api.GET('/api/v1/analytics/summary', { params: { query: windowOf(r) } })) });
}

export function useOverTime(r: Range) {
  const query = { ...windowOf(r), interval: r.interval, tz: r.tz as Zone };
  return useQuery({ queryKey: ['v1', 'analytics', 'over-time', query], queryFn: () => call(api.GET('/api/v1/analytics/conversations-over-time', { params: { query } })) });
}

/** Conversations per hour over the range (at most 2,000 buckets: ranges up to 83 days), summed by hour of the day in the page. */
export function useHourly(r: Range, enabled: boolean) {
  const query = { ...windowOf(r), interval: 'hour' as const, tz: r.tz as Zone };
  return useQuery({ queryKey: ['v1', 'analytics', 'over-time', query], queryFn: () => call(api.GET('/api/v1/analytics/conversations-over-time', { params: { query } })), enabled });
}

export function useChannels(r: Range) {
  return useQuery({ queryKey: ['v1', 'analytics', 'channels', windowOf(r)], queryFn: () => call(api.GET('/api/v1/analytics/channel-breakdown', { params: { query: windowOf(r) } })) });
}

/** People's wait and handle times over the range's conversations (the console's own operation, from the inbox's timeline). */
export function useHandling(r: Range) {
  return useQuery({ queryKey: ['console', 'analytics', 'handling', windowOf(r)], queryFn: () => call(api.GET('/api/console/analytics/handling', { params: { query: windowOf(r) } })) });
}
