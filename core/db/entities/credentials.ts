import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, p } from './common';

/** A provider credential; the secret is sealed and bound to the row id. */
export const Credential = defineEntity({
  name: 'Credential',
  tableName: 'credentials',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    kind: p.enum(['msgapp_access_token'] as const).columnType('text'),
    name: p.text(),
    secretSealed: p.text(),
    createdAt: createdAt(),
  },
});
export type ICredential = InferEntity<typeof Credential>;
