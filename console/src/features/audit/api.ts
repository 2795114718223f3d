import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { api, call, type Body } from '../../lib/api';

export type AuditEvent = Body<'/api/console/audit-events', 'get'>['events'][number];
export const PAGE_SIZE = 50;

/** One page of the audit log, newest first; `cursor` names where the page starts (none: the newest). */
export function useAuditLog(cursor: string | null, action: string) {
  return useQuery({
    queryKey: ['console', 'audit-log', { cursor, action }],
    queryFn: () =>
      call(api.GET('/api/console/audit-events', { params: { query: { limit: PAGE_SIZE, ...(cursor ? { cursor } : {}), ...(action ? { action } : {}) } } })),
    placeholderData: keepPreviousData,
  });
}
