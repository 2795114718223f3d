import { SearchAttributeType } from '@temporalio/common';
import type { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

import { ATTEMPT, DELIVERY_STATUS, EVENT_TYPE, FILE_ID, LAST_ERROR, OUTCOME, SUBSCRIPTION_ID, WORKSPACE_ID } from '../workflows/search-attributes';

export { ATTEMPT, DELIVERY_STATUS, EVENT_TYPE, FILE_ID, LAST_ERROR, OUTCOME, SUBSCRIPTION_ID, WORKSPACE_ID };

export const ALL_SEARCH_ATTRIBUTES = [WORKSPACE_ID, SUBSCRIPTION_ID, EVENT_TYPE, FILE_ID, DELIVERY_STATUS, ATTEMPT, OUTCOME, LAST_ERROR];

/** The Temporal CLI's and the server's names of our attribute types. */
const TYPES = {
  [SearchAttributeType.KEYWORD]: { cli: 'Keyword', indexed: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD },
  [SearchAttributeType.INT]: { cli: 'Int', indexed: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_INT },
} as Record<string, { cli: string; indexed: temporal.api.enums.v1.IndexedValueType }>;

/** The attributes as the `temporal` CLI's `--search-attribute NAME=TYPE` names them. */
export const SEARCH_ATTRIBUTE_FLAGS = ALL_SEARCH_ATTRIBUTES.map((k) => ({ name: k.name, type: TYPES[k.type].cli }));

/** Registers the attributes on the namespace (idempotent), at every worker boot. */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = ALL_SEARCH_ATTRIBUTES.filter((k) => !existing.customAttributes?.[k.name]);
  if (!missing.length) return;
  const searchAttributes: Record<string, temporal.api.enums.v1.IndexedValueType> = {};
  for (const k of missing) searchAttributes[k.name] = TYPES[k.type].indexed;
  try {
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes });
  } catch (err) {
    // Another worker registered them first.
    if (!/already exists/i.test((err as Error).message)) throw err;
  }
}
