import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, p } from './common';

export const ApiKey = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    name: p.text(),
    /** `sk_` + the first 8 characters of the secret: the only part ever shown again. */
    prefix: p.text(),
    /** Hex SHA-256 of the whole key; the key itself is never stored. */
    secretHash: p.text(),
    scopes: p.array(),
    status: p.enum(['active', 'revoked'] as const).columnType('text'),
    createdAt: createdAt(),
    rotatedAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
    /** The whole key sealed with the service's key (bound to the key's id), for the console's copy; null on keys made before it (not copyable until rotated). */
    sealedValue: p.text().nullable(),
    /** Recorded at most once a minute per key (domain/keys/api-keys.ts), not on every request. */
    lastUsedAt: p.datetime().nullable(),
  },
});
export type IApiKey = InferEntity<typeof ApiKey>;

/** Hashes of secrets replaced by a rotation: they answer `revoked_api_key`, not `invalid_api_key`. */
export const RetiredKeySecret = defineEntity({
  name: 'RetiredKeySecret',
  tableName: 'api_key_retired_secrets',
  properties: {
    secretHash: p.text().primary(),
    keyId: p.text(),
    retiredAt: createdAt(),
  },
});
export type IRetiredKeySecret = InferEntity<typeof RetiredKeySecret>;
