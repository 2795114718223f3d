import type { EntityManager } from '@mikro-orm/postgresql';
import { KbFile, VoiceSession, WebhookDelivery } from '../db/entities';
import type { Backlog } from './metrics';

const ageSeconds = (row: { createdAt: Date } | null, now: number) => (row ? Math.max(0, (now - new Date(row.createdAt).getTime()) / 1000) : 0);

/**
 * The database gauges of app/metrics.ts, read when Prometheus scrapes. Read-only counts
 * through the owners' entities, each served by a partial index over the rows that are not
 * settled (Migration20261128160000MetricsIndexes; voice_sessions_active_idx), so a scrape
 * costs the size of the backlog, never of the tables.
 */
export function backlogReader(em: EntityManager): () => Promise<Backlog> {
  return async () => {
    const now = Date.now();
    const [whPending, whRetrying, whOldest, kbPending, kbProcessing, kbOldest, vStarting, vLive] = await Promise.all([
      em.fork().count(WebhookDelivery, { status: 'pending', dispatchedAt: null }),
      em.fork().count(WebhookDelivery, { status: 'pending', dispatchedAt: { $ne: null } }),
      em.fork().findOne(WebhookDelivery, { status: 'pending' }, { orderBy: { createdAt: 'asc' }, fields: ['createdAt'] }),
      em.fork().count(KbFile, { status: 'pending' }),
      em.fork().count(KbFile, { status: 'processing' }),
      em.fork().findOne(KbFile, { status: { $in: ['pending', 'processing'] } }, { orderBy: { createdAt: 'asc' }, fields: ['createdAt'] }),
      em.fork().count(VoiceSession, { status: 'starting' }),
      em.fork().count(VoiceSession, { status: 'live' }),
    ]);
    return {
      webhooks: { pending: whPending, retrying: whRetrying, oldestPendingSeconds: ageSeconds(whOldest, now) },
      indexing: { pending: kbPending, processing: kbProcessing, oldestSeconds: ageSeconds(kbOldest, now) },
      voice: { starting: vStarting, live: vLive },
    };
  };
}
