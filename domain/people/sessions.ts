import type { EntityManager } from '@mikro-orm/postgresql';
import { ConsoleSession, ConsoleUser, type ConsoleRole, type IConsoleSession } from '../../db/entities';
import { newId } from '../../lib/ids';
import { scopesOf } from './roles';
import { hashToken, newToken, TOKEN_PATTERN } from './tokens';

export interface SessionSettings {
  /** A session ends after this long without a request. */
  idleMs: number;
  /** ... and this long after sign-in, whatever its use. */
  absoluteMs: number;
}

/** docs/console.md: 12 hours idle, 7 days in all (CONSOLE_SESSION_IDLE_MINUTES, CONSOLE_SESSION_ABSOLUTE_HOURS). */
export const DEFAULT_SESSION_SETTINGS: SessionSettings = { idleMs: 12 * 3_600_000, absoluteMs: 7 * 24 * 3_600_000 };

/** last_seen_at is written at most this often per session: a request is not a write. */
const TOUCH_EVERY_MS = 60_000;

/** A signed-in console user, as a request carries it (api/types.ts's principal of kind `user`). */
export interface SessionPrincipal {
  kind: 'user';
  /** The user's id (rate limits count per user, as they count per key). */
  id: string;
  sessionId: string;
  workspaceId: string;
  email: string;
  name: string | null;
  role: ConsoleRole;
  scopes: ReadonlySet<string>;
  csrfToken: string;
  expiresAt: Date;
}

/** What a new session hands the browser: the cookie's token (never stored), the CSRF token, the absolute end. */
export interface NewSession {
  token: string;
  csrfToken: string;
  sessionId: string;
  expiresAt: Date;
}

/**
 * Server-side sessions. The cookie holds a random token; the table only its SHA-256. Every sign-in makes a new row and
 * a new token (a token set before sign-in is never the one after: no fixation). A session ends at its absolute expiry,
 * after `idleMs` without a request, when signed out, or when its user signs out everywhere, resets the password or is
 * removed (the row cascades).
 */
export class SessionService {
  constructor(
    private readonly em: EntityManager,
    readonly settings: SessionSettings = DEFAULT_SESSION_SETTINGS,
  ) {}

  /** A new session for `userId`, on the caller's EntityManager (its transaction, when it is one). */
  async create(em: EntityManager, user: { id: string; workspaceId: string }, from: { ip?: string | null; userAgent?: string | null }): Promise<NewSession> {
    const token = newToken();
    const csrfToken = newToken();
    const id = newId('ses');
    const now = new Date();
    const expiresAt = new Date(now.getTime() + this.settings.absoluteMs);
    // The user's sessions that ended over a day ago go at each sign-in: the table holds live sessions and recent ones.
    const dayAgo = new Date(now.getTime() - 86_400_000);
    await em.nativeDelete(ConsoleSession, { userId: user.id, $or: [{ expiresAt: { $lt: dayAgo } }, { revokedAt: { $lt: dayAgo } }] });
    await em.insert(ConsoleSession, {
      id,
      tokenHash: hashToken(token),
      userId: user.id,
      workspaceId: user.workspaceId,
      csrfToken,
      lastSeenAt: now,
      expiresAt,
      ip: from.ip?.slice(0, 100) ?? null,
      userAgent: from.userAgent?.slice(0, 500) ?? null,
    });
    return { token, csrfToken, sessionId: id, expiresAt };
  }

  /** The session's principal when the token names a live session of an existing user; null otherwise. */
  async authenticate(token: string): Promise<SessionPrincipal | null> {
    if (!TOKEN_PATTERN.test(token)) return null;
    const em = this.em.fork();
    const row = await em.findOne(ConsoleSession, { tokenHash: hashToken(token) });
    if (!row || !this.live(row)) return null;
    const user = await em.findOne(ConsoleUser, { id: row.userId });
    if (!user || user.status !== 'active') return null;
    const now = Date.now();
    if (now - row.lastSeenAt.getTime() > TOUCH_EVERY_MS) {
      await em.nativeUpdate(ConsoleSession, { id: row.id, revokedAt: null }, { lastSeenAt: new Date(now) });
    }
    return {
      kind: 'user',
      id: user.id,
      sessionId: row.id,
      workspaceId: user.workspaceId,
      email: user.email,
      name: user.name ?? null,
      role: user.role,
      scopes: scopesOf(user.role),
      csrfToken: row.csrfToken,
      expiresAt: row.expiresAt,
    };
  }

  /**
   * Whether session `id` still stands (not signed out, not expired, its user active), without counting as activity:
   * what a live stream asks on each heartbeat, so an open inbox closes at sign-out yet never keeps an idle session alive.
   */
  async isLive(id: string): Promise<boolean> {
    const em = this.em.fork();
    const row = await em.findOne(ConsoleSession, { id });
    if (!row || !this.live(row)) return false;
    return (await em.count(ConsoleUser, { id: row.userId, status: 'active' })) === 1;
  }

  private live(row: IConsoleSession): boolean {
    const now = Date.now();
    if (row.revokedAt) return false;
    if (row.expiresAt.getTime() <= now) return false;
    return now - row.lastSeenAt.getTime() < this.settings.idleMs;
  }

  /** When the session ends if unused from now on (the earlier of idle and absolute expiry). */
  idleExpiry(p: SessionPrincipal): Date {
    return new Date(Math.min(Date.now() + this.settings.idleMs, p.expiresAt.getTime()));
  }

  async revoke(sessionId: string): Promise<void> {
    await this.em.fork().nativeUpdate(ConsoleSession, { id: sessionId, revokedAt: null }, { revokedAt: new Date() });
  }

  /** Ends the session a token names, if any (a sign-in ends the session its browser had). */
  async revokeToken(token: string): Promise<void> {
    if (!TOKEN_PATTERN.test(token)) return;
    await this.em.fork().nativeUpdate(ConsoleSession, { tokenHash: hashToken(token), revokedAt: null }, { revokedAt: new Date() });
  }

  /** Every live session of the user (sign out everywhere, a password reset), on the caller's EntityManager. */
  async revokeAllOf(em: EntityManager, userId: string): Promise<number> {
    return em.nativeUpdate(ConsoleSession, { userId, revokedAt: null }, { revokedAt: new Date() });
  }
}
