import { defineEntity, type InferEntity } from '@mikro-orm/core';

/**
 * Entities are declared with `defineEntity` (no decorators: esbuild and swc emit no
 * decorator metadata). Table and column names are snake_case; the SQL lives in
 * `core/db/migrations`, which is the source of truth for constraints and indexes.
 */
const p = defineEntity.properties;

export const Workspace = defineEntity({
  name: 'Workspace',
  tableName: 'workspaces',
  properties: {
    id: p.string().primary(),
    name: p.string(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type IWorkspace = InferEntity<typeof Workspace>;

export const ApiKey = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: p.string().primary(),
    workspaceId: p.string(),
    name: p.string(),
    /** `sk_` + the first 8 characters of the secret: the only part ever shown again. */
    prefix: p.string(),
    /** Hex SHA-256 of the whole key; the key itself is never stored. */
    secretHash: p.string(),
    scopes: p.array(),
    status: p.enum(['active', 'revoked'] as const),
    createdAt: p.datetime().onCreate(() => new Date()),
    rotatedAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
  },
});
export type IApiKey = InferEntity<typeof ApiKey>;

/** Hashes of secrets replaced by a rotation: they answer `revoked_api_key`, not `invalid_api_key`. */
export const RetiredKeySecret = defineEntity({
  name: 'RetiredKeySecret',
  tableName: 'api_key_retired_secrets',
  properties: {
    secretHash: p.string().primary(),
    keyId: p.string(),
    retiredAt: p.datetime().onCreate(() => new Date()),
  },
});

export const KbFolder = defineEntity({
  name: 'KbFolder',
  tableName: 'kb_folders',
  properties: {
    id: p.string().primary(),
    workspaceId: p.string(),
    parentId: p.string().nullable(),
    name: p.string(),
    path: p.string(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type IKbFolder = InferEntity<typeof KbFolder>;

export const allEntities = [Workspace, ApiKey, RetiredKeySecret, KbFolder];
