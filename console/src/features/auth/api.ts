import { useMutation, useQuery, useQueryClient, type QueryClient } from '@tanstack/react-query';
import { api, ApiError, call, setCsrfToken, type Body, type RequestBody } from '../../lib/api';
import { pageChanged } from '../../lib/router';

export type Session = Body<'/api/console/session', 'get'>;
export type Role = Session['user']['role'];
export type SignInRequest = RequestBody<'/api/console/sign-in', 'post'>;

export const sessionKey = ['session'] as const;

/** Who is signed in (null: nobody). The session's CSRF token is kept for the client's unsafe requests. */
export function useSession() {
  return useQuery({
    queryKey: sessionKey,
    queryFn: async (): Promise<Session | null> => {
      try {
        const session = await call(api.GET('/api/console/session'));
        setCsrfToken(session.csrf_token);
        return session;
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) {
          setCsrfToken(null);
          return null;
        }
        throw err;
      }
    },
    staleTime: 5 * 60_000,
  });
}

/** A new session (sign-in, a one-time link): everything cached for another one goes. */
export function startSession(client: QueryClient, session: Session): void {
  setCsrfToken(session.csrf_token);
  forgetAllBut(client, session);
}

/** Signed out, or the session ended on the server (a 401 not_signed_in anywhere). */
export function endSession(client: QueryClient): void {
  setCsrfToken(null);
  forgetAllBut(client, null);
}

/** The session's own entry is replaced (its observers see the change); every other answer was someone else's. */
function forgetAllBut(client: QueryClient, session: Session | null): void {
  pageChanged();
  void client.cancelQueries({ predicate: (q) => q.queryKey[0] !== sessionKey[0] });
  client.removeQueries({ predicate: (q) => q.queryKey[0] !== sessionKey[0] });
  client.getMutationCache().clear();
  client.setQueryData(sessionKey, session);
}

export function useSignIn() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: SignInRequest) => call(api.POST('/api/console/sign-in', { body })),
    onSuccess: (session) => startSession(client, session),
  });
}

export function useRequestPasswordReset() {
  return useMutation({ mutationFn: (email: string) => call(api.POST('/api/console/password-reset', { body: { email } })) });
}

export function useSignOut() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: async (everywhere: boolean) => {
      if (everywhere) await call(api.POST('/api/console/sign-out-everywhere'));
      else await call(api.POST('/api/console/sign-out'));
    },
    onSettled: () => endSession(client),
  });
}

/** What a one-time link is for; asking does not use it. */
export function useLink(token: string) {
  return useQuery({
    queryKey: ['links', token],
    queryFn: () => call(api.POST('/api/console/links/inspect', { body: { token } })),
    retry: false,
    staleTime: Infinity,
  });
}

export function useRedeemLink(token: string) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (body: { password: string; name?: string; totp_code?: string }) => call(api.POST('/api/console/links/redeem', { body: { token, ...body } })),
    onSuccess: (session) => startSession(client, session),
  });
}

/** What a role may do in the console: people, keys and the audit log are the owner's and the admin's (docs/console.md). */
export const managesWorkspace = (role: Role) => role === 'owner' || role === 'admin';

/** Whether the session's role holds an /api/v1 scope (the API checks the same on every request). */
export const hasScope = (session: Session, scope: string) => session.scopes.includes(scope);
