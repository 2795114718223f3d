import fs from 'node:fs';
import path from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import { dataDir, type Config } from './config';
import { CredentialService } from '../domain/credentials/credentials';
import { ApiKeyService } from '../domain/keys/api-keys';
import { IdempotencyStore } from '../domain/idempotency/store';
import { SubscriptionService } from '../domain/webhooks/subscriptions';
import { SiteService } from '../domain/widget/sites';
import { SecretBox, type SealedSecrets } from '../lib/crypto/secret-box';

export class EncryptionKeyError extends Error {}

/**
 * The secrets sealed with the service's key, each kind read by the module owning its
 * table, and what each row's ciphertext is bound to (its row id).
 */
const SEALED_SECRETS: ReadonlyArray<{ what: string; read: (em: EntityManager) => Promise<SealedSecrets> }> = [
  { what: 'provider credential', read: (em) => CredentialService.sealedCredentials(em) },
  { what: 'webhook signing secret', read: (em) => SubscriptionService.sealedSigningSecrets(em) },
  { what: 'site secret', read: (em) => SiteService.sealedSiteSecrets(em) },
  { what: 'API key value (kept for the console\'s copy)', read: (em) => ApiKeyService.sealedKeyValues(em) },
];

/**
 * The service's SecretBox, from CONCIERGE_ENCRYPTION_KEY or (embedded: `npm start`, the
 * admin CLI) the key file in the data directory, checked against the database it will
 * serve:
 * - no key anywhere and the database already holds sealed secrets: refused. Generating
 *   a second key would seal new secrets that the other processes cannot open, and the
 *   stored ones could never be opened by this one (the admin CLI run from another
 *   directory, or with another CONCIERGE_DATA_DIR, used to do exactly that);
 * - a key that does not open the stored secrets: refused for the same reason;
 * - no key and nothing sealed yet: a key is generated into the data directory (0600).
 *
 * The key must be settled before any service exists, so the owning services' static
 * readers are called with the bare EntityManager (they need no key to count and sample).
 */
export async function openSecretBox(config: Config, em: EntityManager, opts: { embedded: boolean }): Promise<SecretBox> {
  if (config.CONCIERGE_ENCRYPTION_KEY) {
    const box = SecretBox.fromString(config.CONCIERGE_ENCRYPTION_KEY);
    await assertOpensStoredSecrets(box, em, 'CONCIERGE_ENCRYPTION_KEY');
    return box;
  }
  if (!opts.embedded) throw new EncryptionKeyError('CONCIERGE_ENCRYPTION_KEY is required when the API and worker run as separate processes');
  const dir = dataDir(config);
  const file = path.join(dir, 'encryption.key');
  if (fs.existsSync(file)) {
    const box = SecretBox.fromString(fs.readFileSync(file, 'utf8'));
    await assertOpensStoredSecrets(box, em, file);
    return box;
  }
  const sealed = await countSealed(em);
  if (sealed > 0) {
    throw new EncryptionKeyError(
      `refusing to generate a new encryption key: the database already holds ${sealed} secret(s) sealed with an existing key, ` +
        `but CONCIERGE_ENCRYPTION_KEY is unset and ${file} does not exist. A new key could never open them. ` +
        `Set CONCIERGE_ENCRYPTION_KEY to the key in use, or CONCIERGE_DATA_DIR to the directory whose encryption.key sealed them ` +
        `(npm start keeps it in ./.data of the directory it was started from).`,
    );
  }
  return SecretBox.fromDataDir(dir);
}

async function countSealed(em: EntityManager): Promise<number> {
  let n = 0;
  for (const { read } of SEALED_SECRETS) n += (await read(em.fork())).count;
  // Stored idempotent responses are sealed too: a new key would turn their replays into errors.
  return n + (await IdempotencyStore.sealedResponseCount(em.fork()));
}

/** Opens one stored secret of each kind (each is bound to its row id): a wrong key fails here, not at first use. */
async function assertOpensStoredSecrets(box: SecretBox, em: EntityManager, source: string): Promise<void> {
  for (const { what, read } of SEALED_SECRETS) {
    const { sample: row } = await read(em.fork());
    if (!row) continue;
    try {
      box.open(row.sealed, row.id);
    } catch {
      throw new EncryptionKeyError(
        `the encryption key from ${source} does not open the secrets already in the database (${what} ${row.id}): ` +
          `refusing to use it, since what it sealed could not be opened with the key in use. ` +
          `Set CONCIERGE_ENCRYPTION_KEY (or CONCIERGE_DATA_DIR) to the key that sealed them.`,
      );
    }
  }
}
