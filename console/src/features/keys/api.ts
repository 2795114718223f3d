import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call, type Body, type RequestBody } from '../../lib/api';

export type ApiKey = Body<'/api/console/keys', 'get'>['keys'][number];
export type NewKey = RequestBody<'/api/console/keys', 'post'>;

const keysKey = ['console', 'keys'] as const;

export function useKeys() {
  return useQuery({ queryKey: keysKey, queryFn: () => call(api.GET('/api/console/keys')) });
}

/** The scopes a key may hold, the four the contract pre-selects marked `default`. */
export function useScopes() {
  return useQuery({ queryKey: ['console', 'scopes'], queryFn: () => call(api.GET('/api/console/key-scopes')), staleTime: Infinity });
}

function useKeyMutation<A, R>(fn: (args: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({ mutationFn: fn, onSettled: () => client.invalidateQueries({ queryKey: keysKey }) });
}

export const useCreateKey = () => useKeyMutation((body: NewKey) => call(api.POST('/api/console/keys', { body })));
export const useRotateKey = () => useKeyMutation((id: string) => call(api.POST('/api/console/keys/{id}/rotate', { params: { path: { id } } })));
export const useDeleteKey = () => useKeyMutation((id: string) => call(api.DELETE('/api/console/keys/{id}', { params: { path: { id } } })));
/** The key's value, for the clipboard only: the caller writes it there and keeps it nowhere else. */
export const useCopyKey = () => useKeyMutation((id: string) => call(api.POST('/api/console/keys/{id}/copy', { params: { path: { id } } })));
