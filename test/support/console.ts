import type { FastifyInstance } from 'fastify';
import type { ConsoleRole } from '../../db/entities';
import { CLI_CONTEXT } from '../../domain/audit/audit-log';
import type { Services } from '../../app/services';
import { recordSecret } from './secret-log';

/** The console's origin in these tests (PUBLIC_BASE_URL): https, so cookies are Secure. */
export const CONSOLE_ORIGIN = 'https://console.example.test';
export const PASSWORD = 'correct horse battery staple';

/** A signed-in browser: its session cookie and CSRF token, as the console holds them. */
export interface Browser {
  cookie: string;
  csrf: string;
  userId: string;
  email: string;
}

export const tokenOf = (url: string) => new URL(url).hash.replace(/^#token=/, '');

export function sessionCookie(res: { cookies: Array<{ name: string; value: string }> }): string | undefined {
  return res.cookies.find((c) => c.name === 'concierge_session')?.value;
}

/** Headers of a request made by the console page with this session (same origin, CSRF token). */
export const asBrowser = (b: Browser, extra: Record<string, string> = {}) => ({ cookie: `concierge_session=${b.cookie}`, origin: CONSOLE_ORIGIN, 'x-csrf-token': b.csrf, ...extra });

/** A client address of its own (sign-in and links count per address). */
export const randomAddress = () => `10.${1 + Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;

/** A user made as the CLI makes one (a sign-in link), who then sets a password through the link: signed in. */
export async function signedInUser(app: FastifyInstance, services: Services, workspaceId: string, role: ConsoleRole, email = `${role}-${Math.random().toString(16).slice(2, 10)}@example.com`): Promise<Browser> {
  const made = await services.people.create({ cli: true }, workspaceId, { email, role }, CLI_CONTEXT, 'sign_in');
  const res = await app.inject({ method: 'POST', url: '/api/console/links/redeem', remoteAddress: randomAddress(), headers: { origin: CONSOLE_ORIGIN }, payload: { token: tokenOf(made.link.url), password: PASSWORD } });
  if (res.statusCode !== 200) throw new Error(`redeem failed: ${res.statusCode} ${res.body}`);
  const cookie = sessionCookie(res)!;
  recordSecret('session token', cookie);
  return { cookie, csrf: res.json().csrf_token, userId: made.user.id, email };
}

export async function signIn(app: FastifyInstance, email: string, password = PASSWORD, extra: { remoteAddress?: string; headers?: Record<string, string> } = {}) {
  return app.inject({ method: 'POST', url: '/api/console/sign-in', remoteAddress: extra.remoteAddress, headers: { origin: CONSOLE_ORIGIN, ...extra.headers }, payload: { email, password } });
}

/** The fake model of the inbox's tests: echoes; "a person" calls the handoff tool, whose result it answers with the hand-off. */
export function handoffReply(body: { messages: Array<{ role: string; content: string | null }> }) {
  const last = [...body.messages].reverse().find((m) => m.role === 'user' || m.role === 'tool');
  const text = last?.content ?? '';
  if (last?.role === 'tool') return { text: 'A colleague will take it from here.' };
  if (text.includes('a person')) return { tool_calls: [{ name: 'handoff', arguments: { reason: 'asked for a person' } }] };
  return { text: `Echo: ${text}` };
}
