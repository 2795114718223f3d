import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { IdempotencyKey } from '../../db/entities';
import type { SecretBox } from '../../lib/crypto/secret-box';

export type IdempotencyBegin =
  | { kind: 'proceed' }
  | { kind: 'replay'; status: number; body: string; contentType: string | null }
  | { kind: 'mismatch' }
  | { kind: 'in_progress' };

/** A request whose process died mid-way frees its key after this long, so no key stays stuck. */
const IN_PROGRESS_RECLAIM_SECONDS = 300;

/** Method, path and the parsed body in canonical form: what "the same request" means. */
export function requestFingerprint(method: string, url: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method.toUpperCase()} ${url}\n`)
    .update(canonicalJson(body ?? null))
    .digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * Stripe-style Idempotency-Key storage, scoped to a workspace. A key is claimed
 * (`in_progress`) before the handler runs and completed with the response; a 5xx
 * releases it so the client can retry. Keys expire after the TTL and are purged by the
 * maintenance schedule; an expired key is treated as never seen.
 *
 * Stored responses are sealed with the service's SecretBox: some carry a secret shown
 * once (a subscription's `whsec_…`, key material), and a replay must not leave it in
 * plain text at rest. Every body is sealed, so no endpoint has to declare which do.
 */
export class IdempotencyStore {
  /** Stored responses sealed with the service's key (`v1.` ciphertexts): a new key would turn their replays into errors. */
  static sealedResponseCount(em: EntityManager): Promise<number> {
    return em.count(IdempotencyKey, { responseBody: { $like: 'v1.%' } });
  }

  constructor(
    private readonly em: EntityManager,
    private readonly ttlHours: number,
    private readonly box: SecretBox,
  ) {}

  /** Binds a sealed body to its row: a body copied under another key does not open. */
  private static associatedData(workspaceId: string, key: string): string {
    return `idempotency:${workspaceId}:${key}`;
  }

  private openBody(workspaceId: string, key: string, stored: string | null): string {
    if (stored === null) return '';
    // Rows written before sealing hold the JSON itself (never starting with `v1.`); the
    // migration that introduced sealing deleted those that carried a secret.
    if (!stored.startsWith('v1.')) return stored;
    return this.box.open(stored, IdempotencyStore.associatedData(workspaceId, key));
  }

  async begin(workspaceId: string, key: string, fingerprint: string): Promise<IdempotencyBegin> {
    const em = this.em.fork();
    // One statement claims the key: a new row, or a row whose key expired or whose request
    // was abandoned mid-way; a key held by a live request is left alone (no row back).
    // raw SQL: a conditional upsert (`on conflict … do update … where a or b`): the QueryBuilder's onConflict().where() takes column equalities only.
    // eslint-disable-next-line no-restricted-syntax
    const claimed = await em.execute<{ claimed: number }[]>(
      `insert into idempotency_keys (workspace_id, key, request_hash, state, expires_at)
       values (?, ?, ?, 'in_progress', now() + make_interval(hours => ?))
       on conflict (workspace_id, key) do update
         set request_hash = excluded.request_hash, state = 'in_progress', response_status = null,
             response_body = null, response_content_type = null, created_at = now(), expires_at = excluded.expires_at
         where idempotency_keys.expires_at <= now()
            or (idempotency_keys.state = 'in_progress'
                and idempotency_keys.created_at < now() - make_interval(secs => ?))
       returning 1 as claimed`,
      [workspaceId, key, fingerprint, this.ttlHours, IN_PROGRESS_RECLAIM_SECONDS],
    );
    if (claimed.length) return { kind: 'proceed' };
    const row = await em.findOne(IdempotencyKey, { workspaceId, key });
    // Deleted between our insert and our read (a 5xx released it): let the caller try it.
    if (!row) return this.begin(workspaceId, key, fingerprint);
    if (row.requestHash !== fingerprint) return { kind: 'mismatch' };
    if (row.state !== 'completed') return { kind: 'in_progress' };
    return { kind: 'replay', status: row.responseStatus ?? 200, body: this.openBody(workspaceId, key, row.responseBody ?? null), contentType: row.responseContentType ?? null };
  }

  async complete(workspaceId: string, key: string, status: number, body: string, contentType: string | null): Promise<void> {
    await this.em.fork().nativeUpdate(
      IdempotencyKey,
      { workspaceId, key, state: 'in_progress' },
      { state: 'completed', responseStatus: status, responseBody: this.box.seal(body, IdempotencyStore.associatedData(workspaceId, key)), responseContentType: contentType },
    );
  }

  async release(workspaceId: string, key: string): Promise<void> {
    await this.em.fork().nativeDelete(IdempotencyKey, { workspaceId, key, state: 'in_progress' });
  }

  /** Deletes expired keys in batches; returns how many were removed. */
  async purgeExpired(batch = 5000): Promise<number> {
    let total = 0;
    for (;;) {
      // raw SQL: a batched delete (`delete … limit`) has no ORM form; batches keep each statement short.
      // eslint-disable-next-line no-restricted-syntax
      const rows = await this.em.fork().execute<{ n: string }[]>(
        `with gone as (
           delete from idempotency_keys where ctid in (
             select ctid from idempotency_keys where expires_at <= now() limit ?)
           returning 1)
         select count(*) as n from gone`,
        [batch],
      );
      const n = Number(rows[0]?.n ?? 0);
      total += n;
      if (n < batch) return total;
    }
  }
}
