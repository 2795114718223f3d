import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call, type Body, type RequestBody } from '../../lib/api';

export type Credential = Body<'/api/v1/credentials', 'get'>['credentials'][number];
export type NewCredential = RequestBody<'/api/v1/credentials', 'post'>;
export type Provider = NewCredential['provider'];

const all = ['v1', 'credentials'] as const;

export function useCredentials() {
  return useQuery({ queryKey: all, queryFn: () => call(api.GET('/api/v1/credentials', { params: { query: { limit: 200 } } })) });
}

/** What the credential unlocks, asked of the provider now (msgapp: phone numbers; llm: models). */
export function useResources(id: string) {
  return useQuery({ queryKey: [...all, id, 'resources'], queryFn: () => call(api.GET('/api/v1/credentials/{id}/resources', { params: { path: { id } } })), retry: false });
}

export function useRegisterCredential() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: NewCredential) => call(api.POST('/api/v1/credentials', { body })),
    onSettled: () => client.invalidateQueries({ queryKey: all }),
  });
}
