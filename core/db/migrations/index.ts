import { Migration20261122000100Foundation } from './Migration20261122000100Foundation';
import { Migration20261122000200Webhooks } from './Migration20261122000200Webhooks';
import { Migration20261122000300KnowledgeBase } from './Migration20261122000300KnowledgeBase';

/** Every migration, in order. Listed explicitly so no file glob is needed at run time. */
export const migrations = [
  { name: 'Migration20261122000100Foundation', class: Migration20261122000100Foundation },
  { name: 'Migration20261122000200Webhooks', class: Migration20261122000200Webhooks },
  { name: 'Migration20261122000300KnowledgeBase', class: Migration20261122000300KnowledgeBase },
];
