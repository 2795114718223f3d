import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, p } from './common';

export const Workspace = defineEntity({
  name: 'Workspace',
  tableName: 'workspaces',
  properties: {
    id: p.text().primary(),
    name: p.text(),
    /** Dial-out: ISO country codes allowed (null: every country). domain/voice/destinations.ts. */
    dialOutCountries: p.array().nullable(),
    /** Dial-out: number types allowed (null: DEFAULT_DIALABLE_TYPES). */
    dialOutNumberTypes: p.array().nullable(),
    createdAt: createdAt(),
  },
});
export type IWorkspace = InferEntity<typeof Workspace>;
