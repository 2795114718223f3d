import type { EntityManager } from '@mikro-orm/postgresql';
import { Site } from '../../db/entities';

/** The one data path to `sites` for other modules (an agent turn reads the page commands); SiteService owns the rest. */
export class SiteRepository {
  /** The page commands a site's page handles (empty: none, or no such site). */
  async sitePageCommands(em: EntityManager, siteId: string): Promise<string[]> {
    const row = await em.findOne(Site, { id: siteId }, { fields: ['uiCommands'] });
    return row?.uiCommands ?? [];
  }
}
