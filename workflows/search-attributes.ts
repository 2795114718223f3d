import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Custom search attributes, so an operator finds a workspace's or subscription's workflows in the Temporal UI. */
export const WORKSPACE_ID = defineSearchAttributeKey('ConciergeWorkspaceId', SearchAttributeType.KEYWORD);
export const SUBSCRIPTION_ID = defineSearchAttributeKey('ConciergeSubscriptionId', SearchAttributeType.KEYWORD);
export const EVENT_TYPE = defineSearchAttributeKey('ConciergeEventType', SearchAttributeType.KEYWORD);
export const FILE_ID = defineSearchAttributeKey('ConciergeFileId', SearchAttributeType.KEYWORD);

/** Where a delivery stands (`attempting`, `retrying`, `delivered`, `failed`), upserted as its workflow goes. */
export const DELIVERY_STATUS = defineSearchAttributeKey('ConciergeDeliveryStatus', SearchAttributeType.KEYWORD);
/** The attempt a delivery is at (1-based). */
export const ATTEMPT = defineSearchAttributeKey('ConciergeAttempt', SearchAttributeType.INT);
