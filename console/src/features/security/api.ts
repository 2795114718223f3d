import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call } from '../../lib/api';

const key = ['console', 'totp'] as const;

/** Whether the signed-in person has a second factor, and whether the workspace requires one. */
export function useTotpStatus() {
  return useQuery({ queryKey: key, queryFn: () => call(api.GET('/api/console/totp')) });
}

/** A new secret to add to an authenticator app, shown once. */
export function useBeginTotp() {
  return useMutation({ mutationFn: () => call(api.POST('/api/console/totp/enrol')) });
}

export function useConfirmTotp() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (code: string) => call(api.POST('/api/console/totp/confirm', { body: { code } })),
    onSettled: () => client.invalidateQueries({ queryKey: key }),
  });
}

export function useRequireTotp() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (required: boolean) => call(api.PUT('/api/console/totp/policy', { body: { required } })),
    onSettled: () => client.invalidateQueries({ queryKey: key }),
  });
}
