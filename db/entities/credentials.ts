import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAtMs, p } from './common';

export const CREDENTIAL_PROVIDERS = ['msgapp', 'llm', 'voice', 'telephony', 'mcp'] as const;
export type CredentialProvider = (typeof CREDENTIAL_PROVIDERS)[number];

/**
 * A provider credential: one secret, sealed and bound to the row id, plus the provider's
 * non-secret settings (a business account id, a base URL). `fingerprint` and `last4`
 * describe the secret without revealing it; rows older than those columns get them on
 * first read.
 */
export const Credential = defineEntity({
  name: 'Credential',
  tableName: 'credentials',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    provider: p.enum([...CREDENTIAL_PROVIDERS]).columnType('text'),
    name: p.text(),
    settings: p.json<Record<string, string>>().defaultRaw(`'{}'`),
    secretSealed: p.text(),
    fingerprint: p.text().nullable(),
    last4: p.text().nullable(),
    createdAt: createdAtMs(),
  },
});
export type ICredential = InferEntity<typeof Credential>;
