import { TypedSearchAttributes } from '@temporalio/common';
import { EVENT_TYPE, FILE_ID, SUBSCRIPTION_ID, WORKSPACE_ID } from '../../workflows/search-attributes';

export function searchAttributesFor(v: { workspaceId: string; subscriptionId?: string; eventType?: string; fileId?: string }): TypedSearchAttributes {
  const pairs: ConstructorParameters<typeof TypedSearchAttributes>[0] = [{ key: WORKSPACE_ID, value: v.workspaceId }];
  if (v.subscriptionId) pairs.push({ key: SUBSCRIPTION_ID, value: v.subscriptionId });
  if (v.eventType) pairs.push({ key: EVENT_TYPE, value: v.eventType });
  if (v.fileId) pairs.push({ key: FILE_ID, value: v.fileId });
  return new TypedSearchAttributes(pairs);
}
