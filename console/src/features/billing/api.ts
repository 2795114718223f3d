import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { api, call, type Body } from '../../lib/api';

export type UsageLine = Body<'/api/v1/billing/usage', 'get'>['usage'][number];

export function useCredits() {
  return useQuery({ queryKey: ['v1', 'billing', 'credits'], queryFn: () => call(api.GET('/api/v1/billing/credits')) });
}

/** Usage by UTC day and kind, newest first, over the API's default window (the last 30 days), a page at a time. */
export function useUsage(cursor: string | null) {
  return useQuery({
    queryKey: ['v1', 'billing', 'usage', { cursor }],
    queryFn: () => call(api.GET('/api/v1/billing/usage', { params: { query: { limit: 50, ...(cursor ? { cursor } : {}) } } })),
    placeholderData: keepPreviousData,
  });
}
