import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useRef, useState } from 'react';
import type { paths } from '../../api/schema';
import { api, ApiError, call, currentCsrfToken, type Body, type RequestBody } from '../../lib/api';

type ListQuery = NonNullable<paths['/api/console/inbox/conversations']['get']['parameters']['query']>;
export type InboxFilter = Omit<ListQuery, 'limit'>;
export type InboxConversation = Body<'/api/console/inbox/conversations', 'get'>['conversations'][number];
export type InboxDetail = Body<'/api/console/inbox/conversations/{id}', 'get'>;
export type InboxAction = RequestBody<'/api/console/inbox/conversations/{id}/actions', 'post'>;
export type CannedReply = Body<'/api/console/inbox/canned-replies', 'get'>['canned_replies'][number];
export type Teammate = Body<'/api/console/inbox/team', 'get'>['team'][number];
export type InboxStatus = NonNullable<ListQuery['status']>;
export type InboxAttachment = Body<'/api/console/inbox/conversations/{id}/attachments', 'post', 201>;

/** Every status filter, in words (one the API adds is a missing key here: the build fails). */
export const STATUSES: Record<InboxStatus, string> = {
  open: 'Open',
  needs_human: 'Needs a person',
  mine: 'Assigned to me',
  unassigned: 'Unassigned (the queue)',
  closed: 'Closed',
  all: 'All',
};
export const CHANNELS: Record<InboxConversation['channel'], string> = { web: 'Web chat', msgapp: 'Messaging', voice: 'Voice and calls' };

const all = ['console', 'inbox'] as const;

function listInbox(query: InboxFilter) {
  return call(api.GET('/api/console/inbox/conversations', { params: { query: { limit: 50, ...query } } }));
}

export function useInbox(filter: InboxFilter) {
  return useQuery({ queryKey: [...all, 'list', filter], queryFn: () => listInbox(filter), placeholderData: keepPreviousData });
}

export function useConversation(id: string) {
  return useQuery({ queryKey: [...all, 'conversation', id], queryFn: () => call(api.GET('/api/console/inbox/conversations/{id}', { params: { path: { id } } })) });
}

export function useTeam() {
  return useQuery({ queryKey: [...all, 'team'], queryFn: () => call(api.GET('/api/console/inbox/team')) });
}

export function usePresence() {
  return useQuery({ queryKey: [...all, 'me'], queryFn: () => call(api.GET('/api/console/inbox/me')) });
}

export function useSetPresence() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: RequestBody<'/api/console/inbox/me', 'put'>) => call(api.PUT('/api/console/inbox/me', { body })),
    onSettled: () => client.invalidateQueries({ queryKey: all }),
  });
}

export function useSetAutoAssign() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (auto_assign: boolean) => call(api.PUT('/api/console/inbox/settings', { body: { auto_assign } })),
    onSettled: () => client.invalidateQueries({ queryKey: all }),
  });
}

export function useAct(id: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: InboxAction) => call(api.POST('/api/console/inbox/conversations/{id}/actions', { params: { path: { id } }, body })),
    onSettled: () => client.invalidateQueries({ queryKey: all }),
  });
}

/** The workspace's agents, for the agent filter (workflows:read). */
export function useAgentNames(enabled: boolean) {
  return useQuery({ queryKey: ['v1', 'agents', 'names'], queryFn: () => call(api.GET('/api/v1/agents', { params: { query: { limit: 200 } } })), enabled });
}

/** Active knowledge-base files at the top folder: what a person may attach to a web chat reply (kb:read). */
export function useAttachableFiles(enabled: boolean) {
  return useQuery({
    queryKey: ['v1', 'kb', 'files', 'active-top'],
    queryFn: () => call(api.GET('/api/v1/kb/files', { params: { query: { status: 'active', limit: 200 } } })),
    enabled,
  });
}

export function useCannedReplies() {
  return useQuery({ queryKey: [...all, 'canned'], queryFn: () => call(api.GET('/api/console/inbox/canned-replies')) });
}

export function useCreateCanned() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: RequestBody<'/api/console/inbox/canned-replies', 'post'>) => call(api.POST('/api/console/inbox/canned-replies', { body })),
    onSettled: () => client.invalidateQueries({ queryKey: [...all, 'canned'] }),
  });
}

export function useDeleteCanned() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (id: string) => call(api.DELETE('/api/console/inbox/canned-replies/{id}', { params: { path: { id } } })),
    onSettled: () => client.invalidateQueries({ queryKey: [...all, 'canned'] }),
  });
}

/** A canned reply's variables filled in: {{customer.name}}, {{customer.email}}, {{agent.name}} (the person replying). */
export function fillCanned(text: string, vars: { customer: { name: string | null; email: string | null } | null; agentName: string }): string {
  const values: Record<string, string> = {
    'customer.name': vars.customer?.name || 'there',
    'customer.email': vars.customer?.email ?? '',
    'agent.name': vars.agentName,
  };
  return text.replace(/\{\{\s*([a-z_.]+)\s*\}\}/g, (whole, key: string) => values[key] ?? whole);
}

export interface LiveInbox {
  connected: boolean;
  /** Conversations changed since the page opened that the person has not opened yet. */
  unread: Set<string>;
  markRead: (id: string) => void;
}

/**
 * The inbox's live stream (GET /api/console/inbox/stream, the session cookie): every change refetches the inbox's
 * queries; a conversation waiting for a person raises a browser notification when the person allowed them. The
 * browser's EventSource reconnects by itself; the stream ends at sign-out.
 */
export function useLiveInbox(): LiveInbox {
  const client = useQueryClient();
  const [connected, setConnected] = useState(false);
  const [unread, setUnread] = useState<Set<string>>(new Set());
  const timer = useRef<number | null>(null);
  useEffect(() => {
    const source = new EventSource('/api/console/inbox/stream');
    source.addEventListener('ready', () => setConnected(true));
    source.onerror = () => setConnected(false);
    source.addEventListener('conversation', (event) => {
      const data = JSON.parse((event as MessageEvent<string>).data) as { conversation_id: string; change: string; waiting: boolean };
      setUnread((u) => (u.has(data.conversation_id) ? u : new Set(u).add(data.conversation_id)));
      if (data.waiting && data.change === 'handoff' && typeof Notification !== 'undefined' && Notification.permission === 'granted') {
        new Notification('A conversation needs a person', { body: 'Open the inbox to take it.', tag: data.conversation_id });
      }
      // Several changes at once (a streamed reply's messages) are one refetch.
      if (timer.current === null) {
        timer.current = window.setTimeout(() => {
          timer.current = null;
          void client.invalidateQueries({ queryKey: all });
        }, 150);
      }
    });
    return () => {
      source.close();
      if (timer.current !== null) window.clearTimeout(timer.current);
    };
  }, [client]);
  const markRead = useCallback((id: string) => setUnread((u) => (u.has(id) ? new Set([...u].filter((x) => x !== id)) : u)), []);
  return { connected, unread, markRead };
}

/**
 * A file from the person's computer for a web chat reply (POST …/attachments, multipart): stored as the widget's
 * uploads are; the reply names its upload_id. The session's cookie and CSRF token as every unsafe request.
 */
export async function uploadAttachment(conversationId: string, file: File): Promise<InboxAttachment> {
  const form = new FormData();
  form.append('file', file, file.name);
  const token = currentCsrfToken();
  let res: Response;
  try {
    res = await fetch(`/api/console/inbox/conversations/${encodeURIComponent(conversationId)}/attachments`, { method: 'POST', body: form, headers: token ? { 'X-CSRF-Token': token } : {} });
  } catch {
    throw new ApiError(0, 'network_error', 'The service cannot be reached. Check the connection and try again.');
  }
  const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  if (res.ok) return body as unknown as InboxAttachment;
  throw new ApiError(res.status, typeof body.error === 'string' ? body.error : 'http_error', typeof body.message === 'string' ? body.message : `The service answered ${res.status}.`, null, body);
}

export function useUploadAttachment(conversationId: string) {
  return useMutation({ mutationFn: (file: File) => uploadAttachment(conversationId, file) });
}
