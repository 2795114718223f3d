import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiKeyService } from './auth/api-keys';
import type { KeyCache } from './auth/key-cache';
import { IdempotencyStore } from './idempotency/store';
import { FolderService } from './kb/folders';

/** The domain services shared by the API and the activities; no Fastify, no Temporal inside. */
export interface Services {
  apiKeys: ApiKeyService;
  folders: FolderService;
  idempotency: IdempotencyStore;
}

export function createServices(em: EntityManager, opts: { keyCache?: KeyCache; idempotencyTtlHours: number }): Services {
  return {
    apiKeys: new ApiKeyService(em, opts.keyCache),
    folders: new FolderService(em),
    idempotency: new IdempotencyStore(em, opts.idempotencyTtlHours),
  };
}
