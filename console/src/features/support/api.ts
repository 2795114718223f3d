import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call, type Body, type RequestBody } from '../../lib/api';

export type Ticket = Body<'/api/v1/support/tickets/{id}', 'get'>;
export type TicketSummary = Body<'/api/v1/support/tickets', 'get'>['tickets'][number];
export type NewTicket = RequestBody<'/api/v1/support/tickets', 'post'>;
export type Priority = NonNullable<NewTicket['priority']>;
export type Status = TicketSummary['status'];

/** Every priority and status, in words (one the API adds is a missing key here: the build fails). */
export const PRIORITIES: Record<Priority, string> = { low: 'Low', normal: 'Normal', high: 'High', urgent: 'Urgent' };
export const STATUSES: Record<Status, string> = { open: 'Open: awaiting support', waiting_on_customer: 'Answered: waiting on you', closed: 'Closed' };

const all = ['v1', 'support'] as const;

export function useTickets(cursor: string | null) {
  return useQuery({
    queryKey: [...all, { cursor }],
    queryFn: () => call(api.GET('/api/v1/support/tickets', { params: { query: { limit: 50, ...(cursor ? { cursor } : {}) } } })),
    placeholderData: keepPreviousData,
  });
}

/** A ticket and its thread, followed: asked again every 30 s while its page is open, so support's answers appear. */
export function useTicket(id: string) {
  return useQuery({ queryKey: [...all, id], queryFn: () => call(api.GET('/api/v1/support/tickets/{id}', { params: { path: { id } } })), refetchInterval: 30_000 });
}

export function useRaiseTicket() {
  const client = useQueryClient();
  return useMutation({ mutationFn: (body: NewTicket) => call(api.POST('/api/v1/support/tickets', { body })), onSettled: () => client.invalidateQueries({ queryKey: all }) });
}

export function useReply(id: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: string) => call(api.POST('/api/v1/support/tickets/{id}/reply', { params: { path: { id } }, body: { body } })),
    onSettled: () => client.invalidateQueries({ queryKey: all }),
  });
}
