import type { EntityManager } from '@mikro-orm/postgresql';
import type { KnowledgeBaseRepository } from '../domain/kb/repository';
import type { VoiceSessionService } from '../domain/voice/sessions';
import type { WebhookRepository } from '../domain/webhooks/emitter';
import type { Backlog } from './metrics';

const ageSeconds = (createdAt: Date | null, now: number) => (createdAt ? Math.max(0, (now - new Date(createdAt).getTime()) / 1000) : 0);

/** Whom the gauges ask: each table's owner counts its own rows that are not settled. */
export interface BacklogOwners {
  webhooks: Pick<WebhookRepository, 'deliveryBacklog'>;
  kb: Pick<KnowledgeBaseRepository, 'indexingBacklog'>;
  voice: Pick<VoiceSessionService, 'activeCounts'>;
}

/**
 * The database gauges of app/metrics.ts, read when Prometheus scrapes. Read-only counts
 * asked of the tables' owners (the webhook outbox, the knowledge base, voice sessions),
 * each served by a partial index over the rows that are not settled
 * (Migration20261128160000MetricsIndexes; voice_sessions_active_idx), so a scrape costs
 * the size of the backlog, never of the tables.
 */
export class BacklogReader {
  constructor(
    private readonly em: EntityManager,
    private readonly owners: BacklogOwners,
  ) {}

  /** One read of every gauge (the owners' reads run at once). */
  async read(): Promise<Backlog> {
    const now = Date.now();
    const [webhooks, indexing, voice] = await Promise.all([this.owners.webhooks.deliveryBacklog(this.em), this.owners.kb.indexingBacklog(this.em), this.owners.voice.activeCounts()]);
    return {
      webhooks: { pending: webhooks.pending, retrying: webhooks.retrying, oldestPendingSeconds: ageSeconds(webhooks.oldestPendingAt, now) },
      indexing: { pending: indexing.pending, processing: indexing.processing, oldestSeconds: ageSeconds(indexing.oldestAt, now) },
      voice,
    };
  }
}
