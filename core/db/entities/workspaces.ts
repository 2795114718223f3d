import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, p } from './common';

export const Workspace = defineEntity({
  name: 'Workspace',
  tableName: 'workspaces',
  properties: {
    id: p.text().primary(),
    name: p.text(),
    createdAt: createdAt(),
  },
});
export type IWorkspace = InferEntity<typeof Workspace>;
