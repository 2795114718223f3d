import type { EntityManager } from '@mikro-orm/postgresql';
import { ConversationRepository } from '../conversations/repository';
import { DomainError } from '../errors';
import { checkSite, type SiteRow, type SiteService } from '../widget/sites';

/** What a reply socket was opened with; re-checked for as long as it stays open. */
export interface SocketGrant {
  siteId: string;
  origin: string | undefined;
  conversationId: string;
}

interface ConversationRow {
  id: string;
  site_id: string | null;
  channel: string;
  status: string;
}

type SiteAccessRow = Pick<SiteRow, 'id' | 'workspace_id' | 'agent_id' | 'status' | 'allowed_origins'>;

/**
 * An open web conversation of this very site: not another site's of the same workspace
 * and agent, and so never a suspended site's (whose own check already failed). The id is
 * the capability (no user_hash in a URL): the widget hands it only to the conversation's
 * owner, and a verified visitor's only with their user_hash (see WidgetSessionService).
 */
const openOnSite = (site: SiteAccessRow, conv: ConversationRow | undefined) => Boolean(conv && conv.site_id === site.id && conv.channel === 'web' && conv.status === 'open');

/**
 * Who may hold a widget reply socket: the site and Origin checks of the widget API, and
 * an open web conversation of that site. Checked at the handshake (403s) and again
 * whenever authorization may have changed (in batches: one query per table for all the
 * sockets of a process).
 */
export class SocketAccess {
  constructor(
    private readonly em: EntityManager,
    private readonly sites: SiteService,
    private readonly conversationRows: ConversationRepository = new ConversationRepository(),
  ) {}

  /** The handshake: refused with the site check's code, or `forbidden` for the conversation (the API answers every refusal with a 403: see ChatHub.authorize). */
  async authorize(grant: SocketGrant): Promise<void> {
    const site = await this.sites.authenticate(grant.siteId, grant.origin);
    const [conv] = await this.conversations([grant.conversationId]);
    if (!openOnSite(site, conv)) throw new DomainError('forbidden', `Conversation '${grant.conversationId}' is not an open conversation of this site`);
  }

  /** Whether each grant still holds, in order. Database errors propagate: unknown is not a refusal. */
  async stillAllowed(grants: SocketGrant[]): Promise<boolean[]> {
    if (!grants.length) return [];
    const siteIds = [...new Set(grants.map((g) => g.siteId))];
    const sites: SiteAccessRow[] = await this.sites.many(siteIds);
    const convs = await this.conversations([...new Set(grants.map((g) => g.conversationId))]);
    const siteById = new Map(sites.map((s) => [s.id, s]));
    const convById = new Map(convs.map((c) => [c.id, c]));
    return grants.map((g) => {
      const site = siteById.get(g.siteId);
      if (!site) return false;
      try {
        checkSite(site, g.origin);
      } catch {
        return false;
      }
      return openOnSite(site, convById.get(g.conversationId));
    });
  }

  private conversations(ids: string[]): Promise<ConversationRow[]> {
    return this.conversationRows.conversationsForAccess(this.em.fork(), ids);
  }
}
