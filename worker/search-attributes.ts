import { defineSearchAttributeKey, SearchAttributeType, TypedSearchAttributes } from '@temporalio/common';
import type { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/** Custom search attributes, so an operator finds a workspace's or subscription's workflows in the Temporal UI. */
export const WORKSPACE_ID = defineSearchAttributeKey('ConciergeWorkspaceId', SearchAttributeType.KEYWORD);
export const SUBSCRIPTION_ID = defineSearchAttributeKey('ConciergeSubscriptionId', SearchAttributeType.KEYWORD);
export const EVENT_TYPE = defineSearchAttributeKey('ConciergeEventType', SearchAttributeType.KEYWORD);
export const FILE_ID = defineSearchAttributeKey('ConciergeFileId', SearchAttributeType.KEYWORD);

export const ALL_SEARCH_ATTRIBUTES = [WORKSPACE_ID, SUBSCRIPTION_ID, EVENT_TYPE, FILE_ID];

/** The attributes as the `temporal` CLI's `--search-attribute NAME=TYPE` names them (all keywords). */
export const SEARCH_ATTRIBUTE_FLAGS = ALL_SEARCH_ATTRIBUTES.map((k) => ({ name: k.name, type: 'Keyword' }));

export function searchAttributesFor(v: { workspaceId: string; subscriptionId?: string; eventType?: string; fileId?: string }): TypedSearchAttributes {
  const pairs: ConstructorParameters<typeof TypedSearchAttributes>[0] = [{ key: WORKSPACE_ID, value: v.workspaceId }];
  if (v.subscriptionId) pairs.push({ key: SUBSCRIPTION_ID, value: v.subscriptionId });
  if (v.eventType) pairs.push({ key: EVENT_TYPE, value: v.eventType });
  if (v.fileId) pairs.push({ key: FILE_ID, value: v.fileId });
  return new TypedSearchAttributes(pairs);
}

/** Registers the attributes on the namespace (idempotent), at every worker boot. */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = ALL_SEARCH_ATTRIBUTES.filter((k) => !existing.customAttributes?.[k.name]);
  if (!missing.length) return;
  const searchAttributes: Record<string, temporal.api.enums.v1.IndexedValueType> = {};
  for (const k of missing) searchAttributes[k.name] = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
  try {
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes });
  } catch (err) {
    // Another worker registered them first.
    if (!/already exists/i.test((err as Error).message)) throw err;
  }
}
