import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { api, call, type Body } from '../../lib/api';

export type ConversationTurns = Body<'/api/console/conversations/{id}/turns', 'get'>;
export type DebugTurn = ConversationTurns['turns'][number];
export type ConversationRow = Body<'/api/v1/conversations', 'get'>['conversations'][number];

/** Recent conversations, newest first, a page at a time: what the debugger's index picks from. */
export function useRecentConversations(cursor: string | null) {
  return useQuery({
    queryKey: ['v1', 'conversations', { cursor }],
    queryFn: () => call(api.GET('/api/v1/conversations', { params: { query: { limit: 25, ...(cursor ? { cursor } : {}) } } })),
    placeholderData: keepPreviousData,
  });
}

/**
 * A conversation's turns as its workflow history recorded them. Not cached beyond the page: an owner's or admin's
 * every read is an audited view of the unmasked output, so the page asks once per visit and on Refresh only.
 */
export function useTurns(id: string) {
  return useQuery({
    queryKey: ['console', 'conversations', id, 'turns'],
    queryFn: () => call(api.GET('/api/console/conversations/{id}/turns', { params: { path: { id } } })),
    staleTime: Infinity,
    gcTime: 0,
    refetchOnWindowFocus: false,
  });
}

/** The export's address: a plain download (the session cookie goes with it; Content-Disposition names the file). */
export const historyUrl = (id: string) => `/api/console/conversations/${encodeURIComponent(id)}/history`;
