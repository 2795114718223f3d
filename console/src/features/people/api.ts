import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call, type Body, type RequestBody } from '../../lib/api';

export type User = Body<'/api/console/users', 'get'>['users'][number];
export type Invitation = RequestBody<'/api/console/users', 'post'>;

const usersKey = ['console', 'users'] as const;

export function useUsers() {
  return useQuery({ queryKey: usersKey, queryFn: () => call(api.GET('/api/console/users')) });
}

function useUserMutation<A, R>(fn: (args: A) => Promise<R>) {
  const client = useQueryClient();
  return useMutation({ mutationFn: fn, onSettled: () => client.invalidateQueries({ queryKey: usersKey }) });
}

export const useInvite = () => useUserMutation((body: Invitation) => call(api.POST('/api/console/users', { body })));
export const useChangeRole = () =>
  useUserMutation(({ id, role }: { id: string; role: User['role'] }) => call(api.PATCH('/api/console/users/{id}', { params: { path: { id } }, body: { role } })));
export const useRemoveUser = () => useUserMutation((id: string) => call(api.DELETE('/api/console/users/{id}', { params: { path: { id } } })));
/** A new one-time link for the user: an invitation while they have no password, else a password reset. */
export const useIssueLink = () => useUserMutation((id: string) => call(api.POST('/api/console/users/{id}/link', { params: { path: { id } } })));
/** Recovery of a lost authenticator: the person's second factor removed (they sign in with the password and may enrol again). */
export const useResetTotp = () => useUserMutation((id: string) => call(api.DELETE('/api/console/users/{id}/totp', { params: { path: { id } } })));
