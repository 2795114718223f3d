import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { api, call, type Body } from '../../lib/api';

export type Message = Body<'/api/v1/messages/{id}', 'get'>;
export type MessageStatus = Message['status'];
export const STATUSES: MessageStatus[] = ['sent', 'delivered', 'read', 'failed'];

/** Messages sent through the API, newest first, by status, a page at a time. */
export function useMessages(status: MessageStatus | null, cursor: string | null) {
  return useQuery({
    queryKey: ['v1', 'messages', { status, cursor }],
    queryFn: () => call(api.GET('/api/v1/messages', { params: { query: { limit: 50, ...(status ? { status } : {}), ...(cursor ? { cursor } : {}) } } })),
    placeholderData: keepPreviousData,
  });
}

/** One message with its status history. */
export function useMessage(id: string) {
  return useQuery({ queryKey: ['v1', 'messages', id], queryFn: () => call(api.GET('/api/v1/messages/{id}', { params: { path: { id } } })) });
}
