import type { EntityManager } from '@mikro-orm/postgresql';
import { ConsoleLink, type IConsoleLink, type LinkKind } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { hashToken, newToken, TOKEN_PATTERN } from './tokens';

/** How long a link lives: a day to sign in or accept an invitation, an hour to reset a password. */
export const LINK_TTL_MS: Record<LinkKind, number> = { sign_in: 24 * 3_600_000, invitation: 24 * 3_600_000, password_reset: 3_600_000 };

export interface IssuedLink {
  kind: LinkKind;
  /** The console page that redeems it; the token is in the fragment, which browsers never send to a server. */
  url: string;
  expires_at: string;
}

/** The console page every link opens: it asks /api/console/links/inspect what the token is, then redeems it. */
export const linkUrl = (baseUrl: string, token: string) => `${baseUrl}/console/link#token=${token}`;

const unknownLink = () => new DomainError('link_not_found', 'token: no such link (it may have been mistyped or cut short)');
const spentLink = () => new DomainError('link_expired', 'token: this link was already used or has expired; ask for a new one');

/**
 * One-time links: a random token of which only the hash is stored, an expiry, and one use. Consuming is one
 * conditional UPDATE (unused and unexpired → used), so two redemptions racing cannot both succeed.
 */
export class LinkService {
  constructor(private readonly baseUrl: string) {}

  async issue(em: EntityManager, kind: LinkKind, user: { id: string; workspaceId: string }): Promise<IssuedLink> {
    const token = newToken();
    const expiresAt = new Date(Date.now() + LINK_TTL_MS[kind]);
    // The user's links used or expired over a day ago go when a new one is issued.
    const dayAgo = new Date(Date.now() - 86_400_000);
    await em.nativeDelete(ConsoleLink, { userId: user.id, $or: [{ expiresAt: { $lt: dayAgo } }, { usedAt: { $lt: dayAgo } }] });
    await em.insert(ConsoleLink, { id: newId('lnk'), tokenHash: hashToken(token), kind, userId: user.id, workspaceId: user.workspaceId, expiresAt });
    return { kind, url: linkUrl(this.baseUrl, token), expires_at: expiresAt.toISOString() };
  }

  /** The live link a token names: 404 link_not_found, or 410 link_expired when used or past its expiry. */
  async peek(em: EntityManager, token: string): Promise<IConsoleLink> {
    if (!TOKEN_PATTERN.test(token)) throw unknownLink();
    const row = await em.findOne(ConsoleLink, { tokenHash: hashToken(token) });
    if (!row) throw unknownLink();
    if (row.usedAt || row.expiresAt.getTime() <= Date.now()) throw spentLink();
    return row;
  }

  /** Marks the link used, once: the first caller gets the row, every other one 410 link_expired. */
  async consume(em: EntityManager, token: string): Promise<IConsoleLink> {
    const row = await this.peek(em, token);
    const taken = await em.nativeUpdate(ConsoleLink, { id: row.id, usedAt: null, expiresAt: { $gt: new Date() } }, { usedAt: new Date() });
    if (taken !== 1) throw spentLink();
    return row;
  }

  /** Other unused links of the user of one kind stop working (a new invitation replaces the old one). */
  async retire(em: EntityManager, userId: string, kind: LinkKind): Promise<void> {
    await em.nativeUpdate(ConsoleLink, { userId, kind, usedAt: null }, { usedAt: new Date() });
  }
}
