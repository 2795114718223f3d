import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call, type Body, type RequestBody } from '../../lib/api';

export type SsoSettings = NonNullable<Body<'/api/console/sso', 'get'>['sso']>;
export type SsoSettingsInput = RequestBody<'/api/console/sso', 'put'>;
export type SsoRole = SsoSettingsInput['default_role'];

const key = ['console', 'sso'] as const;

/** The workspace's OpenID Connect sign-in (null: none set up); the client secret only as its last four. */
export function useSsoSettings() {
  return useQuery({ queryKey: key, queryFn: async () => (await call(api.GET('/api/console/sso'))).sso });
}

export function useSaveSso() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: SsoSettingsInput) => call(api.PUT('/api/console/sso', { body })),
    onSettled: () => client.invalidateQueries({ queryKey: key }),
  });
}

export function useDeleteSso() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () => call(api.DELETE('/api/console/sso')),
    onSettled: () => client.invalidateQueries({ queryKey: key }),
  });
}
