import type { EntityManager } from '@mikro-orm/postgresql';
import type { IndexingService } from '../core/kb/indexing';
import type { Services } from '../core/services';

/** What the activities are closed over: the worker wires real ones, tests their own. */
export interface ActivityDeps {
  em: EntityManager;
  services: Pick<Services, 'idempotency' | 'deliveries' | 'blobs' | 'messages' | 'providerEvents' | 'transcript' | 'turns' | 'uploads' | 'tasks'>;
  indexing: IndexingService;
}
