import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiKeyService } from './auth/api-keys';
import type { KeyCache } from './auth/key-cache';
import { dataDir, type Config } from './config';
import { SecretBox } from './crypto/secret-box';
import { IdempotencyStore } from './idempotency/store';
import { FolderService } from './kb/folders';
import { policyFromCidrs } from './net/ssrf';
import { DeliveryService } from './webhooks/deliveries';
import type { SenderSettings } from './webhooks/sender';
import { SubscriptionService } from './webhooks/subscriptions';

/** The domain services shared by the API and the activities; no Fastify, no Temporal inside. */
export interface Services {
  apiKeys: ApiKeyService;
  folders: FolderService;
  idempotency: IdempotencyStore;
  subscriptions: SubscriptionService;
  deliveries: DeliveryService;
}

export interface ServiceOptions {
  keyCache?: KeyCache;
  idempotencyTtlHours: number;
  box: SecretBox;
  sender: SenderSettings;
}

export function createServices(em: EntityManager, opts: ServiceOptions): Services {
  return {
    apiKeys: new ApiKeyService(em, opts.keyCache),
    folders: new FolderService(em),
    idempotency: new IdempotencyStore(em, opts.idempotencyTtlHours),
    subscriptions: new SubscriptionService(em, opts.box, opts.sender),
    deliveries: new DeliveryService(em, opts.box, opts.sender),
  };
}

/**
 * Service options from configuration. `embedded` (npm start, the admin CLI) may generate
 * the encryption key into the data directory; separate production processes must share
 * one key, so there it is required.
 */
export function serviceOptionsFromConfig(config: Config, opts: { embedded: boolean; keyCache?: KeyCache }): ServiceOptions {
  let box: SecretBox;
  if (config.CONCIERGE_ENCRYPTION_KEY) box = SecretBox.fromString(config.CONCIERGE_ENCRYPTION_KEY);
  else if (opts.embedded) box = SecretBox.fromDataDir(dataDir(config));
  else throw new Error('CONCIERGE_ENCRYPTION_KEY is required when the API and worker run as separate processes');
  return {
    keyCache: opts.keyCache,
    idempotencyTtlHours: config.IDEMPOTENCY_TTL_HOURS,
    box,
    sender: { policy: policyFromCidrs(config.CONCIERGE_WEBHOOK_ALLOW_CIDRS), timeoutMs: config.CONCIERGE_WEBHOOK_TIMEOUT_MS },
  };
}
